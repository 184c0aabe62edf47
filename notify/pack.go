package notify

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	mcpconfig "github.com/taskdeck/taskdeck/mcpclient/config"
	"github.com/taskdeck/taskdeck/model"
)

// The outbox commits a task's event with the write that made it, so its
// bytes are paid on a durable write (BENCHMARKS.md, "the outbox's cost").
// It therefore holds the payload packed: its fields, without the JSON's
// names, with times as integers, and without what follows from the event
// and the task's id (type, show, answer, settle); the Deliverer unpacks it
// into the very JSON json.Marshal makes of the Payload. A body that does
// not start with packedV1 is JSON as is (a server's event, or an event
// committed before packing).
const packedV1 = 0x01

// Pack is the body the outbox keeps of p: packed when Unpack makes the
// same JSON of it (every task event NewPayload makes: its derived fields
// are derive's, its times UTC, the timestamp in whole milliseconds), its
// JSON otherwise.
func Pack(p Payload) ([]byte, error) {
	d := p.Data
	if d.Task == nil || d.Server != nil || derive(d.Event, d.Task.ID) != (derived{p.Type, d.Show, d.Answer, d.Settle}) ||
		!utc(p.Timestamp) || p.Timestamp.Nanosecond()%1e6 != 0 || !utc(d.Task.CreatedAt) || d.Deadline != nil && !utc(d.Deadline.At) {
		return json.Marshal(p)
	}
	t := d.Task
	b := make([]byte, 0, 128)
	b = append(b, packedV1)
	b = appendString(b, d.Event)
	b = binary.AppendVarint(b, p.Timestamp.UnixMilli())
	for _, s := range []string{t.ID, t.Server, t.Tool, string(t.Status), t.StatusMessage, t.Agent, t.Error} {
		b = appendString(b, s)
	}
	b = appendTime(b, t.CreatedAt)
	b = binary.AppendUvarint(b, uint64(len(d.Questions)))
	for _, q := range d.Questions {
		b = appendString(appendString(b, q.Key), q.Method)
		b = appendString(b, string(q.Params))
	}
	if d.Deadline == nil {
		return append(b, 0), nil
	}
	b = appendTime(append(b, 1), d.Deadline.At)
	return appendString(appendString(b, d.Deadline.SetBy), d.Deadline.Outcome), nil
}

// Unpack is the JSON an endpoint gets of a body the outbox kept.
func Unpack(body []byte) ([]byte, error) {
	if len(body) == 0 || body[0] != packedV1 {
		return body, nil
	}
	r := reader{b: body[1:]}
	var p Payload
	t := &TaskInfo{}
	p.Data.Event = r.string()
	p.Timestamp = time.UnixMilli(r.varint()).UTC()
	var status string
	for _, s := range []*string{&t.ID, &t.Server, &t.Tool, &status, &t.StatusMessage, &t.Agent, &t.Error} {
		*s = r.string()
	}
	t.Status, t.CreatedAt = model.Status(status), r.time()
	p.Data.Task = t
	for n := r.uvarint(); n > 0 && r.err == nil; n-- {
		q := Question{Key: r.string(), Method: r.string()}
		if params := r.string(); params != "" {
			q.Params = json.RawMessage(params)
		}
		p.Data.Questions = append(p.Data.Questions, q)
	}
	if r.byte() == 1 {
		p.Data.Deadline = &Deadline{At: r.time(), SetBy: r.string(), Outcome: r.string()}
	}
	if r.err == nil && len(r.b) > 0 {
		r.err = fmt.Errorf("%d bytes left over", len(r.b))
	}
	if r.err != nil {
		return nil, fmt.Errorf("the outbox's event is damaged: %w", r.err)
	}
	dv := derive(p.Data.Event, t.ID)
	p.Type, p.Data.Show, p.Data.Answer, p.Data.Settle = dv.typ, dv.show, dv.answer, dv.settle
	return json.Marshal(p)
}

// derived is what NewPayload makes of an event's kind and task id.
type derived struct{ typ, show, answer, settle string }

func derive(kind, id string) derived {
	d := derived{typ: "task." + kind, show: "taskdeck get " + id}
	if kind == mcpconfig.EventFound {
		d.settle = "taskdeck adopt " + id + " (or: taskdeck leave " + id + ")"
	}
	if kind == mcpconfig.EventInputRequired || kind == mcpconfig.EventDeadline {
		d.answer = "taskdeck answer " + id + " KEY RESPONSE_JSON"
	}
	return d
}

// utc: t marshals as it unpacks (in UTC).
func utc(t time.Time) bool { return t.Location() == time.UTC }

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

func appendTime(b []byte, t time.Time) []byte {
	return binary.AppendUvarint(binary.AppendVarint(b, t.Unix()), uint64(t.Nanosecond()))
}

// reader reads a packed body; its first error sticks.
type reader struct {
	b   []byte
	err error
}

var errShort = errors.New("cut short")

func (r *reader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) string() string {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.fail()
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

func (r *reader) byte() byte {
	if len(r.b) == 0 {
		r.fail()
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *reader) time() time.Time {
	sec := r.varint()
	return time.Unix(sec, int64(r.uvarint())).UTC()
}

func (r *reader) fail() {
	if r.err == nil {
		r.err = errShort
	}
	r.b = nil
}
