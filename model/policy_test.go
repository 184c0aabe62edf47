package model

import (
	"testing"
	"time"
)

var polNow = time.Date(2026, 8, 1, 12, 0, 0, 0, time.UTC)

func testPolicy() PollPolicy {
	return PollPolicy{Default: time.Second, Floor: 250 * time.Millisecond, Cap: 30 * time.Second, Growth: 1.6, Jitter: 0.1}
}

func TestDefaultPollPolicy(t *testing.T) {
	want := testPolicy()
	want.AgeFraction = 0.1
	if DefaultPollPolicy != want {
		t.Fatalf("DefaultPollPolicy = %+v, DESIGN.md says %+v", DefaultPollPolicy, testPolicy())
	}
}

func TestPollNext(t *testing.T) {
	p := testPolicy()
	const (
		ms = time.Millisecond
		s  = time.Second
	)
	cases := []struct {
		name string
		in   PollInput
		want time.Duration
	}{
		{"first poll, no hint: Default", PollInput{}, s},
		{"first poll, hint above floor", PollInput{ServerHint: 5 * s}, 5 * s},
		{"first poll, hint below floor: Floor", PollInput{ServerHint: 100 * ms}, 250 * ms},
		{"first poll, hint at floor", PollInput{ServerHint: 250 * ms}, 250 * ms},
		{"growth ×1.6", PollInput{Previous: s}, 1600 * ms},
		{"growth ×1.6 from hint", PollInput{Previous: 5 * s, ServerHint: 5 * s}, 8 * s},
		{"growth stops at Cap", PollInput{Previous: 20 * s}, 30 * s},
		{"at Cap stays at Cap", PollInput{Previous: 30 * s}, 30 * s},
		{"change resets to Default", PollInput{Previous: 30 * s, Changed: true}, s},
		{"change resets to hint", PollInput{Previous: 30 * s, Changed: true, ServerHint: 2 * s}, 2 * s},
		{"hint above Cap honoured on first poll", PollInput{ServerHint: 60 * s}, 60 * s},
		{"hint above Cap honoured while growing", PollInput{Previous: 60 * s, ServerHint: 60 * s}, 60 * s},
		{"hint raised mid-growth wins", PollInput{Previous: s, ServerHint: 10 * s}, 10 * s},
		{"one error doubles", PollInput{Previous: s, Errors: 1}, 2 * s},
		{"two errors ×4", PollInput{Previous: s, Errors: 2}, 4 * s},
		{"errors from start when no previous", PollInput{Errors: 1}, 2 * s},
		{"errors use hint as base", PollInput{Previous: s, ServerHint: 3 * s, Errors: 1}, 6 * s},
		{"errors stop at Cap", PollInput{Previous: s, Errors: 10}, 30 * s},
		{"many errors stay at Cap", PollInput{Previous: 30 * s, Errors: 40}, 30 * s},
		{"errors at Cap, every count", PollInput{Previous: 30 * s, Errors: 29}, 30 * s},
		{"huge error count stays at Cap", PollInput{Previous: 30 * s, Errors: 1 << 30}, 30 * s},
		{"errors with hint above Cap", PollInput{Previous: 60 * s, ServerHint: 60 * s, Errors: 3}, 60 * s},
		{"RetryAfter above the computed delay", PollInput{Previous: s, Errors: 1, RetryAfter: 10 * s}, 10 * s},
		{"RetryAfter above Cap honoured", PollInput{Previous: 30 * s, Errors: 5, RetryAfter: 120 * s}, 120 * s},
		{"RetryAfter without error", PollInput{Previous: s, RetryAfter: 45 * s}, 45 * s},
		{"RetryAfter below delay ignored", PollInput{Previous: 10 * s, Errors: 1, RetryAfter: s}, 20 * s},
		{"deadline ahead shortens", PollInput{Previous: 10 * s, Now: polNow, Deadline: polNow.Add(5 * s)}, 5 * s},
		{"deadline ahead but further than delay", PollInput{Previous: 10 * s, Now: polNow, Deadline: polNow.Add(time.Minute)}, 16 * s},
		{"deadline ahead, never under floor", PollInput{Previous: 10 * s, Now: polNow, Deadline: polNow.Add(100 * ms)}, 250 * ms},
		{"deadline ahead, never under hint", PollInput{Previous: 10 * s, ServerHint: 2 * s, Now: polNow, Deadline: polNow.Add(s)}, 2 * s},
		{"deadline passed: normal", PollInput{Previous: 10 * s, Now: polNow, Deadline: polNow.Add(-s)}, 16 * s},
		{"deadline exactly now: normal", PollInput{Previous: 10 * s, Now: polNow, Deadline: polNow}, 16 * s},
		{"deadline ignored while erroring", PollInput{Previous: 10 * s, Errors: 1, Now: polNow, Deadline: polNow.Add(s)}, 20 * s},
		{"deadline ignored under RetryAfter", PollInput{Previous: s, RetryAfter: 10 * s, Now: polNow, Deadline: polNow.Add(2 * s)}, 10 * s},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := p.Next(c.in); got != c.want {
				t.Fatalf("Next(%+v) = %v, want %v", c.in, got, c.want)
			}
		})
	}
}

// TestPollSequence walks a quiet task from the first poll to the cap and
// back, the way the tracker feeds Next its own output.
func TestPollSequence(t *testing.T) {
	p := testPolicy()
	var prev time.Duration
	var seen []time.Duration
	for range 12 {
		prev = p.Next(PollInput{Previous: prev})
		seen = append(seen, prev)
	}
	want := []time.Duration{1000, 1600, 2560, 4096, 6553, 10485, 16777, 26843, 30000, 30000, 30000, 30000}
	for i, w := range want {
		got := seen[i].Round(time.Millisecond) / time.Millisecond
		// float rounding may cost a nanosecond; compare in ms with slack of 1.
		if d := int64(got) - int64(w); d < -1 || d > 1 {
			t.Fatalf("step %d: %v (all: %v)", i, seen[i], seen)
		}
	}
	if got := p.Next(PollInput{Previous: prev, Changed: true}); got != time.Second {
		t.Fatalf("reset = %v", got)
	}
}

// TestPollNeverFasterThanHintOrFloor is invariant 4: whatever the inputs,
// the delay is never under the server's hint or the floor, never negative.
func TestPollNeverFasterThanHintOrFloor(t *testing.T) {
	p := testPolicy()
	prevs := []time.Duration{0, time.Millisecond, time.Second, 30 * time.Second, time.Hour}
	hints := []time.Duration{0, 10 * time.Millisecond, 3 * time.Second, 2 * time.Minute}
	for _, prev := range prevs {
		for _, hint := range hints {
			for _, errs := range []int{0, 1, 5, 31, 32, 33, 64, 1000} {
				for _, changed := range []bool{false, true} {
					for _, dl := range []time.Duration{0, -time.Second, time.Millisecond, 2 * time.Second} {
						in := PollInput{Previous: prev, ServerHint: hint, Errors: errs, Changed: changed, Now: polNow}
						if dl != 0 {
							in.Deadline = polNow.Add(dl)
						}
						got := p.Next(in)
						if got < hint || got < p.Floor {
							t.Fatalf("Next(%+v) = %v: under hint or floor", in, got)
						}
						if errs > 0 && got < min(p.Cap, max(prev, p.Floor)) {
							t.Fatalf("Next(%+v) = %v: erroring faster than before", in, got)
						}
						if got > max(p.Cap, hint, prev*2) {
							t.Fatalf("Next(%+v) = %v: over the cap", in, got)
						}
					}
				}
			}
		}
	}
}

func TestWithJitter(t *testing.T) {
	p := testPolicy()
	base := 10 * time.Second // grown past the first interval (Default 1 s)
	in := PollInput{}
	if got := p.WithJitter(in, base, 0); got != base {
		t.Fatalf("r=0: %v", got)
	}
	limit := base + time.Duration(float64(base)*p.Jitter)
	for i := range 1000 {
		r := float64(i) / 1000
		got := p.WithJitter(in, base, r)
		if got < base || got > limit {
			t.Fatalf("r=%v: %v outside [%v, %v]", r, got, base, limit)
		}
	}
	// Out-of-range draws are clamped: jitter never subtracts nor exceeds Jitter×base.
	for _, r := range []float64{-1, -0.5, 1, 1.5, 100} {
		got := p.WithJitter(in, base, r)
		if got < base || got > limit {
			t.Fatalf("r=%v: %v outside [%v, %v]", r, got, base, limit)
		}
	}
	if got := (PollPolicy{}).WithJitter(in, base, 0.9); got != base {
		t.Fatalf("no jitter configured: %v", got)
	}
}

// A delay at the server's interval (or the default, or the floor) is kept
// exact: jitter there would put the median notice of a change past half
// the interval the server asked for.
func TestNoJitterAtTheFirstInterval(t *testing.T) {
	p := testPolicy()
	for _, c := range []struct {
		hint, base time.Duration
	}{
		{0, p.Default},
		{500 * time.Millisecond, 500 * time.Millisecond},
		{100 * time.Millisecond, p.Floor}, // a hint below the floor
	} {
		if got := p.WithJitter(PollInput{ServerHint: c.hint}, c.base, 0.999); got != c.base {
			t.Errorf("hint %v: a delay of %v jittered to %v", c.hint, c.base, got)
		}
	}
	if got := p.WithJitter(PollInput{ServerHint: 500 * time.Millisecond}, 800*time.Millisecond, 0.999); got <= 800*time.Millisecond {
		t.Errorf("a grown delay was not jittered: %v", got)
	}
}

// A server cannot push the next poll beyond MaxServerWait, nor make a
// delay wrap around to a negative one (which would end the watch).
func TestServerDelaysAreClamped(t *testing.T) {
	p := testPolicy()
	huge := []time.Duration{9e12 * time.Millisecond, time.Duration(1<<63 - 1), -time.Second}
	for _, d := range huge {
		for _, in := range []PollInput{
			{ServerHint: d, Now: polNow},
			{ServerHint: d, Previous: time.Second, Errors: 3, Now: polNow},
			{RetryAfter: d, Errors: 1, Now: polNow},
			{ServerHint: d, RetryAfter: d, Errors: 1, Now: polNow, Deadline: polNow.Add(time.Minute)},
		} {
			next := p.Next(in)
			got := p.WithJitter(in, next, 0.999)
			if next <= 0 || got <= 0 || next > MaxServerWait || got > MaxServerWait+time.Duration(float64(MaxServerWait)*p.Jitter) {
				t.Errorf("Next(%+v) = %v, jittered %v; want within (0, %v] before jitter", in, next, got, MaxServerWait)
			}
		}
	}
}

func TestPollGrowthBoundedByAge(t *testing.T) {
	p := DefaultPollPolicy
	const s = time.Second
	cases := []struct {
		name string
		in   PollInput
		want time.Duration
	}{
		{"young: no growth past the first interval", PollInput{Previous: s, Age: 2 * s}, s},
		{"young: hint holds", PollInput{Previous: 2 * s, ServerHint: 2 * s, Age: 3 * s}, 2 * s},
		{"young: 10 s at the first interval", PollInput{Previous: s, Age: 10 * s}, s},
		{"10% of the age", PollInput{Previous: 10 * s, Age: 50 * s}, 5 * s},
		{"growth below the age bound", PollInput{Previous: 2 * s, Age: 40 * s}, 3200 * time.Millisecond},
		{"old: Cap", PollInput{Previous: 30 * s, Age: time.Hour}, 30 * s},
		{"errors back off past the age bound", PollInput{Previous: s, Age: 2 * s, Errors: 2}, 4 * s},
	}
	for _, c := range cases {
		if got := p.Next(c.in); got != c.want {
			t.Errorf("%s: Next(%+v) = %v, want %v", c.name, c.in, got, c.want)
		}
	}
}

// TestPollNoticedWithinBound walks the default policy's polls (jitter at
// its most) past the end of tasks of many lengths: each end is seen
// within max(first interval, 10% of the age x (1+Jitter)).
func TestPollNoticedWithinBound(t *testing.T) {
	p := DefaultPollPolicy
	for _, hint := range []time.Duration{0, 500 * time.Millisecond, 5 * time.Second} {
		for end := 100 * time.Millisecond; end < 2*time.Hour; end = end*9/8 + 37*time.Millisecond {
			start := max(hint, p.Floor)
			if hint == 0 {
				start = p.Default
			}
			at, prev := start, time.Duration(0) // the first poll: one interval after the handle
			for at < end {
				in := PollInput{Previous: prev, ServerHint: hint, Age: at, Now: polNow}
				prev = p.Next(in)
				at += p.WithJitter(in, prev, 1)
			}
			bound := max(start, time.Duration(float64(end/10)*(1+p.Jitter)))
			if late := at - end; late > bound {
				t.Fatalf("hint %v: a task that ended at %v was seen %v later, bound %v", hint, end, late, bound)
			}
		}
	}
}
