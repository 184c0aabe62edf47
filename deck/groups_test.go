package deck

import (
	"strings"
	"testing"

	"github.com/taskdeck/taskdeck/model"
)

func TestParseStatusesTakesGroupsAndLists(t *testing.T) {
	st, gs, err := ParseStatuses("failed, open,waiting")
	if err != nil || len(st) != 1 || st[0] != model.StatusFailed || len(gs) != 2 || gs[0].Name != "open" || gs[1].Name != "waiting" {
		t.Fatalf("ParseStatuses = %v %v %v", st, gs, err)
	}
	_, _, err = ParseStatuses("open,stuck")
	if err == nil || !strings.Contains(err.Error(), `"stuck"`) || !strings.Contains(err.Error(), "problems") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("an unknown name: %v", err)
	}
}
