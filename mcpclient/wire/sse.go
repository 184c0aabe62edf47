package wire

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
)

// ScanEvents reads a text/event-stream and calls yield with the data of
// each "message" event (the default type) until yield says stop, the
// stream ends, or it breaks. Data lines are joined with newlines, as the
// SSE format says; an event without data (a priming one) is skipped. An
// event whose data passes max bytes ends the scan with an error. yield
// must copy what it keeps of data: the buffer is reused.
//
// It returns only the stream's own failure (a read error, an event too
// large); the client's tasks/get and push streams and the proxy's relay
// all read events through it.
func ScanEvents(r io.Reader, max int, yield func(data []byte) (stop bool)) error {
	sc := scanners.Get().(*scanner)
	br := sc.br
	br.Reset(r)
	data := sc.data[:0]
	defer func() {
		br.Reset(nil)
		if cap(data) <= maxKeptData {
			sc.data = data
		}
		scanners.Put(sc)
	}()
	var name string
	hasData := false
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			line, err = readLongLine(br, line, max)
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		eof := err != nil
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 { // a blank line ends an event; so does the end of the stream
			if len(data) > 0 && (name == "" || name == "message") {
				if yield(data) {
					return nil
				}
			}
			data, name, hasData = data[:0], "", false
			if eof {
				return nil
			}
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "data":
			if hasData {
				data = append(data, '\n')
			}
			if len(data)+len(value) > max {
				return &EventTooLargeError{Max: max}
			}
			data, hasData = append(data, value...), true
		case "event":
			name = string(value)
		}
	}
}

// EventTooLargeError means that one event's data passed the bound a reader set.
type EventTooLargeError struct{ Max int }

func (e *EventTooLargeError) Error() string {
	return fmt.Sprintf("an event is larger than %d bytes", e.Max)
}

// scanner is what ScanEvents reuses from one stream to the next: its
// read buffer and the buffer events are gathered in.
type scanner struct {
	br   *bufio.Reader
	data []byte
}

var scanners = sync.Pool{New: func() any { return &scanner{br: bufio.NewReader(nil)} }}

// maxKeptData is the largest event buffer kept for later streams: a rare
// larger one is left to the GC.
const maxKeptData = 64 << 10

// readLongLine finishes a line longer than the reader's buffer, reading
// no more than max bytes of it.
func readLongLine(br *bufio.Reader, start []byte, max int) ([]byte, error) {
	line := append([]byte(nil), start...)
	for {
		more, err := br.ReadSlice('\n')
		line = append(line, more...)
		if len(line) > max+len("data: \r\n") {
			return nil, &EventTooLargeError{Max: max}
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return line, err
		}
	}
}
