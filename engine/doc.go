// Package engine is taskdeck's engine: the one run loop that makes calls
// durable, polls every open task to its end, answers, cancels, reconciles
// at start and publishes every committed change as a feed. It implements
// deck.Deck in process, and it is the only code that changes records.
//
// Who may call it: the process that owns the store (badger.Open's lock
// makes it the sole writer): the command line and the dashboard when no
// owner runs, the service that serves the Deck to other processes, a Go
// program that embeds taskdeck. Everyone else reaches it through a deck.
//
// The engine starts lazily. Open opens the store, turns the `calling`
// intents a crash left behind into `orphaned` and sends nothing. Polling
// (the start-up reconcile, then the schedule of due polls) starts on the
// first Watch or PollNow and runs until Close. So a short command (ls, get,
// a call without --wait) that owns the store for a moment sends nothing
// but its own requests.
//
// The tracker (tracker.go, actions.go, orphans.go) is the one-task
// operations the loop is built on: a call made durable, one poll, an
// answer, a cancel; mcpclient below it speaks MCP and knows no store.
//
// Ownership (owner.go): the loop and the tracker ask an owner which tasks
// they hold and how to write what a server says. On Badger the store's
// lock makes this process the sole owner of every task. On PostgreSQL
// (package fleet, whose doc draws a claim's states) each member of the
// fleet (an engine opened with Options.Claim: `serve`) holds the tasks it
// has claimed, and every write of a server's word carries its fence; an
// engine opened without Claim watches. fleet.go is the fleet's owner and
// the loop's side of the claim rounds.
//
// Push (push.go): the loop keeps one subscriptions/listen stream per HTTP
// server for the open tasks it watches there. A pushed state goes through
// the same code as a poll's answer; a pushed task is polled only every
// Options.PushSafety (10 min by default), every other one as before. A
// dropped stream is polled around and re-subscribed with backoff (the
// policy's default doubling to its cap); a server that refuses is polled
// and asked again after 10 minutes.
package engine
