package notify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"time"

	mcpconfig "github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/store"
	"github.com/taskdeck/taskdeck/termtext"
)

// maxHookOutput bounds what of a hook's stdout and stderr is kept (for
// the error text); the rest is read and dropped so that the hook never
// blocks on a full pipe.
const maxHookOutput = 4 << 10

type command struct {
	hook mcpconfig.CommandHook
}

func newCommand(c mcpconfig.CommandHook) *command { return &command{hook: c} }

func (c *command) timeout() time.Duration { return c.hook.Timeout }

// send runs the hook's argv (no shell) with the event's JSON on stdin and
// the event's id in TASKDECK_EVENT_ID. It is killed, with its process
// group where there is one, past its timeout; a non-zero exit is a failed
// delivery.
func (c *command) send(ctx context.Context, e store.OutboxEntry) error {
	ctx, cancel := context.WithTimeout(ctx, c.hook.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.hook.Argv[0], c.hook.Argv[1:]...)
	cmd.Stdin = bytes.NewReader(e.Body)
	cmd.Env = append(cmd.Environ(), "TASKDECK_EVENT_ID="+e.ID)
	out := &capped{max: maxHookOutput}
	cmd.Stdout, cmd.Stderr = out, out
	ownGroup(cmd)
	// A grandchild holding the pipes open cannot keep Wait past this.
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	if ctx.Err() == context.DeadlineExceeded {
		return fmt.Errorf("%s: killed after %s", c.hook.Argv[0], c.hook.Timeout)
	}
	var exit *exec.ExitError
	switch {
	case errors.Is(err, exec.ErrWaitDelay):
		// The hook exited 0 and left a child holding its output: it has
		// delivered, and failing it would run it again a second later.
		// What it left goes with its group: nothing of a hook outlives
		// its delivery.
		killGroup(cmd)
		return nil
	case errors.As(err, &exit):
		msg := fmt.Sprintf("%s: %v", c.hook.Argv[0], exit)
		if out.Len() > 0 {
			msg += ": " + termtext.OneLine(termtext.Line(out.String()), 200)
		}
		return errors.New(msg)
	case err != nil:
		return fmt.Errorf("%s: %w", c.hook.Argv[0], err)
	}
	return nil
}

// capped keeps the first max bytes written to it and drops the rest.
type capped struct {
	bytes.Buffer
	max int
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.Len(); room > 0 {
		c.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

var _ io.Writer = (*capped)(nil)
