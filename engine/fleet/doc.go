// Package fleet is how an engine owns tasks on a shared database
// (PostgreSQL, reached through store.Shared), where every engine on every
// host opens the same records and none owns them all: claims, leases,
// fences, heartbeats, takeovers, and the database's health as the engine
// sees it. On Badger none of this exists: the store's directory lock makes
// one process the sole owner of every task (the engine's soleOwner).
//
// # The model
//
// A claim is one engine's right to poll one task: a row naming the
// engine, a lease (Options.Lease, 7 s by default) and a fence. A lease is
// how long the claim lasts unrenewed; the claim rounds renew every held
// claim every Options.Renew (2 s: three tries inside a lease). A fence is
// a number that grows with every claim of the task: each write of what a
// server said carries the writer's fence (Claimer.Update), and the
// database refuses it with store.ErrFenced once another engine holds a
// newer one. An engine writes under fence 0 only while no engine holds a
// live claim.
//
// A task's claim goes through these states:
//
//	            claim round: expired ones first, then its share
//	unclaimed ─────────────────────────────────────────────► held
//	    ▲                                                (fence n, lease 7 s)
//	    │ the lease runs out                                 │   ▲
//	    │ (its engine died, stalled                          │   │ renewed every 2 s
//	    │  or closed)                                        ├───┘ (one write per 500)
//	    │                                                    │
//	    └──────────── lost ◄── renewal refused: taken over ──┤
//	                  (another holds fence n+1; this         │
//	                   engine's writes fail store.ErrFenced) │ an intent whose maker
//	                                                         │ is not alive
//	                               released ◄── orphaned ◄───┘ (written under fence n)
//
// Who may write: what a server says about a task (a poll's answer, a
// push) is written only by the engine holding its claim, under its fence.
// An operator's acts (a call's intent, an answer, a cancel, forget) are
// written by any engine, unfenced but conditional on the revision read (of
// two answers to one input, one is taken and sent): the task's watcher
// hears of them in the database's feed and polls at once
// (Claimer.HeardNew).
//
// Members and watchers: an engine opened as a member (Options.Member,
// `serve`) claims its share of the open tasks of the servers it has
// credentials for, counted over the live members, plus a trickle of 8 a
// round so that tasks of servers only some members reach are not left
// behind. An engine opened as a watcher (the dashboard, a command, a Go
// program) reads the records and who watches each (Claimer.Watch), counts
// in no member's share, and claims only the tasks of servers no live
// member reaches, so that closing it moves no claim.
//
// Heartbeats: an engine records itself alive (a row with a lease) before
// the first intent it makes, and every renewal after (Claimer.Maker), so
// that an intent names a maker the others can see alive. It leaves the
// live ones when it closes.
//
// A lost lease: when a renewal is refused (another engine took the claim
// over), the claim is lost: the round hands its id to the loop, which
// drops the task from its schedule; a poll already under way has its
// write refused by the fence, so the engine that took it over is never
// overwritten.
//
// A takeover: each round takes first every claim whose lease ran out
// (its engine died, stalled or closed), beyond its share, and schedules
// those tasks ahead of its own backlog. The rounds also wake when the
// first lease of another engine runs out (Claimer.Next), so a dead
// engine's tasks are polled again within the lease of its last renewal.
// A `calling` intent found among the claimed whose maker is not alive, or
// that is older than a call can take (by the database's clock, never
// another engine's), is its crash's: marked orphaned under the fence,
// then released (Claimer.Crashed).
//
// A store outage: every request's outcome and the listener's word go to
// the engine's Health. While the database is unreachable the loop starts
// no poll (its result could not be written) and keeps its schedule; the
// claims stand until their leases run out, so the first rounds after the
// outage renew or take them again. A failed read of the fleet keeps the
// last view but not its next expiry, so the rounds keep their pace.
//
// # Invariants, and the tests that show them
//
//   - Two engines never hold one task's claim at once:
//     store/postgres TestClaimsAreDisjoint, TestClaimExpiredTakesOnlyRunOutClaims;
//     engine TestFleetThreeEnginesShareTheTasks.
//   - An engine that lost a claim cannot overwrite the one that took it:
//     store/postgres TestLostClaimCannotWrite, TestUnclaimedWriteOnlyWhileNoneHolds;
//     engine TestFleetLostClaimCannotOverwrite, TestFleetLostClaimStopsPolling.
//   - A dead engine's tasks are polled by another within the lease:
//     engine TestFleetDeadEngineTasksTakenOver, TestFleetDyingEngineProcess;
//     e2e TestFleetThreeProcesses.
//   - A crash's intent becomes orphaned and nothing re-sends it; a live
//     engine's slow or skewed-clock call is not orphaned:
//     engine TestFleetCrashedIntentBecomesOrphaned, TestFleetDeadEnginesIntentOrphanedAtOnce,
//     TestFleetLiveEnginesSlowCallNotOrphaned, TestFleetSkewedClockCallNotOrphaned,
//     TestFleetContinuedCallAgesFromItsLastCall, TestFleetOrphanedIntentTakesItsHandle.
//   - An operator's act on any engine reaches the server once, and shows at once:
//     engine TestFleetAnswerElsewhereSentOnce, TestFleetRacingAnswersOneReachesServer,
//     TestFleetActsElsewhereShowAtOnce.
//   - Everyone sees who watches each task, or that no engine can:
//     engine TestFleetShowsWhichEngineWatches, TestFleetTaskNoEngineCanReach,
//     TestFleetFeedsSeeEachOther; store/postgres TestFleetView.
//   - A watcher takes no member's share and closing it moves no claim:
//     engine TestFleetWatcherClaimsNothing, TestFleetLoneWatcherPollsItsCall;
//     e2e TestFleetDashboardClaimsNothing.
//   - An outage pauses polling and loses nothing; one failed request does
//     not stop it; the rounds keep their pace while it lasts:
//     engine TestStoreLostPausesPolling, TestCallHandleLostWithTheDatabase,
//     TestFleetOneLostRequestDoesNotStopPolling, TestFleetRoundsKeepTheirPaceWhileDown,
//     TestFleetDatabaseRestart; store/postgres TestHealthHookHearsRequests;
//     e2e TestDBLostWatchAndCall, TestDBLostDashboard.
//
// # Bounds
//
// One claim round writes at most one RenewClaims and one ClaimTasks or
// ClaimExpired per 500 claims; a Claimer keeps, per held task, its claim,
// its lease's end and the last operator's act heard (bounded by the tasks
// it holds), and one view of the fleet (bounded by the open tasks).
package fleet
