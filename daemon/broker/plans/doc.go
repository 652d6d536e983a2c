// Package plans owns what is said and done to one plan's API record
// (termdv1.Plan) apart from the broker's state: a new plan (New) and the
// first state its verdict gives it (Decided), its state changes, each
// checked against domain.PlanState's table (Move) or, at start, settled in
// a final state the receipts prove (RestoreFinal); the next step it shows
// and the hint a refused change gives (NextStep, Hint); its approval and
// denial (Approve, Deny), who may give them and on what (MayApprove,
// CheckApproval, DenialReason), and the adviser's flag raising its
// scrutiny (Flag); which plans a listing shows and in what order (Listed,
// Newest); a plan's state for an event or a journal record, sharing its
// sub-messages, which a plan replaces and never writes into (Snapshot).
//
// The broker holds the plans, guards them with its mutex and calls these
// with it held.
//
// It may import daemon/domain and lower packages (errdefs, policy, the
// proto package), never daemon/broker nor another of the broker's noun
// packages.
package plans
