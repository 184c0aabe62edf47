package present

import (
	"strings"
	"testing"
	"time"

	"github.com/taskdeck/taskdeck/model"
)

// A folded history entry says how many transitions it stands for instead
// of a message.
func TestHistoryShowsFoldedCount(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	rec := &model.Task{History: []model.Transition{
		{At: at, To: model.StatusCalling},
		{At: at, From: model.StatusWorking, To: model.StatusInputRequired, Folded: 9950},
		{At: at, From: model.StatusInputRequired, To: model.StatusWorking, Message: "resumed"},
	}}
	lines := History(rec, time.TimeOnly)
	if len(lines) != 3 || !strings.HasSuffix(lines[1], "working → input_required  (9950 changes folded, the last at this time)") ||
		!strings.HasSuffix(lines[2], "input_required → working  resumed") {
		t.Fatalf("history lines:\n%s", strings.Join(lines, "\n"))
	}
}

// Ages keep their seconds under ten minutes, and fit five cells.
func TestAgeHasSecondsUnderTenMinutes(t *testing.T) {
	for d, want := range map[time.Duration]string{
		-time.Second: "0s", 59 * time.Second: "59s", 74 * time.Second: "1m14s", 65 * time.Second: "1m05s",
		10*time.Minute - time.Second: "9m59s", 10 * time.Minute: "10m", 3 * time.Hour: "3h", 50 * time.Hour: "2d",
	} {
		if got := Age(d); got != want || len(got) > 5 {
			t.Errorf("Age(%v) = %q, want %q", d, got, want)
		}
	}
}
