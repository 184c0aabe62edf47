package model

import (
	"math"
	"time"
)

// PollPolicy decides when a task is polled next. It is a pure function of
// its inputs so that every edge can be tested without a clock.
type PollPolicy struct {
	Default time.Duration // first interval when the server gives no hint
	Floor   time.Duration // never poll faster than this, whatever the server says
	Cap     time.Duration // growth and error backoff stop here
	Growth  float64       // factor applied while nothing changes
	// Jitter: up to this fraction of a delay that grew past the first
	// interval is added (never subtracted), so that polls of tasks that
	// went quiet together spread out. A delay at the first interval (the
	// server's pollIntervalMs) is kept exact: a change at a random moment
	// is then seen half an interval later at the median, not more.
	Jitter float64
	// AgeFraction bounds growth by the task's age: while quiet, the delay
	// stays within max(the first interval, AgeFraction×age), so a short
	// task is noticed within that (plus jitter) of its end, not a whole
	// Cap later. 0: growth is bounded by Cap alone.
	AgeFraction float64
}

// DefaultPollPolicy is DESIGN.md's policy: 1 s, ×1.6 while quiet, 30 s cap.
var DefaultPollPolicy = PollPolicy{
	Default: time.Second,
	Floor:   250 * time.Millisecond,
	Cap:     30 * time.Second,
	Growth:  1.6,
	Jitter:  0.1,
	// A task up to 10 s old is polled every second (or at its
	// pollIntervalMs), one 5 min old at least every 30 s (the cap): a
	// task is noticed within max(1 s or pollIntervalMs, 10% of its age
	// ×1.1) of its end.
	AgeFraction: 0.1,
}

// MaxServerWait bounds every delay a server asks for (pollIntervalMs,
// Retry-After): a server cannot put a task out of sight for longer.
const MaxServerWait = time.Hour

// PollInput is what the policy looks at after one poll.
type PollInput struct {
	Previous   time.Duration // the last base delay (0 before the first poll)
	ServerHint time.Duration // the server's latest pollIntervalMs, 0 if none
	Changed    bool          // the task changed in this poll (status, message, ...)
	Errors     int           // consecutive failed polls, this one included
	RetryAfter time.Duration // the server asked us to wait (429/503)
	Now        time.Time
	Deadline   time.Time     // createdAt + ttlMs, zero if unknown
	Age        time.Duration // since the task was handed out (for AgeFraction)
}

// first is the first interval: the server's hint, else Default.
func (p PollPolicy) first(hint time.Duration) time.Duration {
	if hint = min(max(hint, 0), MaxServerWait); hint > 0 {
		return hint
	}
	return p.Default
}

// Next returns the base delay (without jitter) before the next poll.
func (p PollPolicy) Next(in PollInput) time.Duration {
	in.ServerHint = min(max(in.ServerHint, 0), MaxServerWait)
	in.RetryAfter = min(max(in.RetryAfter, 0), MaxServerWait)
	start := p.first(in.ServerHint)
	var d time.Duration
	switch {
	case in.Errors > 0:
		// Exponential backoff from wherever we were, to the cap.
		base := max(in.Previous, start)
		d = scaleCapped(base, math.Pow(2, float64(min(in.Errors, 32))), p.Cap)
	case in.Previous == 0 || in.Changed:
		d = start
	default:
		d = scaleCapped(in.Previous, p.Growth, p.Cap)
		if p.AgeFraction > 0 {
			d = min(d, max(start, scaleCapped(max(in.Age, 0), p.AgeFraction, p.Cap)))
		}
	}
	// The server's hint is a floor of its own, above the cap if it says so.
	d = max(d, in.ServerHint, p.Floor)
	if in.RetryAfter > d {
		d = in.RetryAfter
	}
	// Do not sleep past the end of the task's life: one poll at the
	// deadline decides whether it is still there.
	if !in.Deadline.IsZero() && in.Errors == 0 && in.RetryAfter == 0 {
		if left := in.Deadline.Sub(in.Now); left > 0 && left < d {
			d = max(left, in.ServerHint, p.Floor)
		}
	}
	return d
}

// scaleCapped returns min(d×f, limit), comparing in floating point first:
// a product beyond the range of time.Duration must not wrap around to a
// negative delay (which the floor would then turn into a fast poll).
func scaleCapped(d time.Duration, f float64, limit time.Duration) time.Duration {
	if x := float64(d) * f; x < float64(limit) {
		return time.Duration(x)
	}
	return limit
}

// WithJitter adds up to Jitter×base to a base (from Next(in)) that grew
// past the first interval, with r drawn from [0,1); r outside [0,1] is
// clamped, so jitter never subtracts.
func (p PollPolicy) WithJitter(in PollInput, base time.Duration, r float64) time.Duration {
	if base <= max(p.first(in.ServerHint), p.Floor) {
		return base
	}
	r = min(max(r, 0), 1)
	return base + scaleCapped(base, p.Jitter*r, math.MaxInt64-base)
}
