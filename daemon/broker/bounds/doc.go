// Package bounds owns the per-principal plan bounds (config plans.*,
// docs/OPERATIONS.md): what one principal's plans hold (Use: open plans and
// their request bytes, finished plans kept, journal bytes), trimming its
// finished plans to plans.keep_finished and plans.max_journal_bytes (Trim),
// also for the principals whose plans settled under one hold of the
// broker's mutex (Settled), and refusing a plan past sessions.max_plans,
// plans.max_open, plans.max_open_bytes or plans.max_journal_bytes after
// making room (PlanRoom; SessionRoom, Room, JournalRoom) with an error that
// says what to do.
//
// The broker holds one Uses, guards it with its mutex and keeps each plan's
// place in it (daemon/broker/planbounds.go); Trim reaches the plans through
// Plans.
//
// It may import daemon/domain and lower packages (config, errdefs), never
// daemon/broker nor another of the broker's noun packages.
package bounds
