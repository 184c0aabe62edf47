package nodetest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Receiver is testdata/webhooks/receiver.mjs running on loopback: a
// Standard Webhooks endpoint on the npm standardwebhooks package's own
// verifier, which nobody here wrote.
type Receiver struct {
	URL string // http://127.0.0.1:PORT/hook
}

// Delivery is one delivery the receiver verified and took.
type Delivery struct {
	ID   string `json:"id"`   // webhook-id
	Type string `json:"type"` // the payload's type
	Task string `json:"task"` // its data.task.id
	// Status, Questions (their keys) and Answer (the command) are the
	// payload's data.task.status, data.questions and data.answer.
	Status    string   `json:"status"`
	Questions []string `json:"questions"`
	Answer    string   `json:"answer"`
}

// ReceiverLog is what the receiver saw: every delivery it took, in order
// (a repeat too), those it refused for a bad signature, and those it
// failed on purpose.
type ReceiverLog struct {
	Accepted []Delivery `json:"accepted"`
	Refused  int        `json:"refused"`
	Failed   int        `json:"failed"`
}

// StartReceiver starts the receiver with secret (whsec_...), answering 503
// to failPercent of the deliveries, never to one webhook-id's third try
// (so that an event's retries end within seconds); env adds settings
// (REDIRECT=1). It is killed, by its pid, at cleanup.
func StartReceiver(t testing.TB, secret string, failPercent int, env ...string) *Receiver {
	t.Helper()
	dir := Install(t, filepath.Join(testdataDir(), "webhooks"), "receiver.mjs")
	cmd := exec.Command("node", filepath.Join(dir, "receiver.mjs"))
	cmd.Env = append(append(os.Environ(), "SECRET="+secret, fmt.Sprintf("FAIL_PERCENT=%d", failPercent)), env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := startListening(t, cmd, out, "listening ", "the webhook receiver")
	return &Receiver{URL: "http://127.0.0.1:" + p + "/hook"}
}

// Log reads what the receiver saw.
func (r *Receiver) Log(t testing.TB) ReceiverLog {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(strings.TrimSuffix(r.URL, "/hook") + "/log")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var l ReceiverLog
	if err := json.NewDecoder(resp.Body).Decode(&l); err != nil {
		t.Fatal(err)
	}
	return l
}
