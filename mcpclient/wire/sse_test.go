package wire

import (
	"errors"
	"strings"
	"testing"
)

func TestScanEventsReadsMessageEvents(t *testing.T) {
	long := strings.Repeat("x", 10000)             // longer than the reader's buffer
	stream := ": keep-alive\n\nid: 1\ndata:\n\n" + // a comment, a priming event
		"data: {\"a\":\ndata: 1}\n\n" + // two data lines, one event
		"event: ping\ndata: skipped\n\n" +
		"event: message\r\ndata: " + long + "\r\n\r\n" +
		"data: last, no blank line"
	var got []string
	if err := ScanEvents(strings.NewReader(stream), 1<<20, func(data []byte) bool {
		got = append(got, string(data))
		return false
	}); err != nil {
		t.Fatal(err)
	}
	want := []string{"{\"a\":\n1}", long, "last, no blank line"}
	if len(got) != len(want) {
		t.Fatalf("got %d events %q, want %d", len(got), got, len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("event %d = %.40q, want %.40q", i, got[i], want[i])
		}
	}
}

func TestScanEventsStopsWhereTold(t *testing.T) {
	n := 0
	err := ScanEvents(strings.NewReader("data: 1\n\ndata: 2\n\n"), 100, func([]byte) bool { n++; return true })
	if err != nil || n != 1 {
		t.Fatalf("yield called %d times, err %v; want once and nil", n, err)
	}
}

func TestScanEventsRefusesAnEventPastItsBound(t *testing.T) {
	for name, stream := range map[string]string{
		"one long line":   "data: " + strings.Repeat("x", 20000) + "\n\n",
		"many data lines": strings.Repeat("data: "+strings.Repeat("x", 100)+"\n", 200) + "\n",
	} {
		err := ScanEvents(strings.NewReader(stream), 8000, func([]byte) bool {
			t.Errorf("%s: yielded an event past the bound", name)
			return false
		})
		var tooLarge *EventTooLargeError
		if !errors.As(err, &tooLarge) {
			t.Errorf("%s: err = %v, want an EventTooLargeError", name, err)
		}
	}
}
