// Package wire holds the broker's proto forms of policy decisions and
// profiles: one conversion each, at the edge. The policy's words become the
// API's enums (a decision, its preview, its sandbox profile and terminal),
// what a decision or request shows is redacted with the broker's redactor,
// passed in, and a past execution is made from its receipt. The other way,
// an API request becomes the policy's canonical input (Request: checked
// against plans.max_request_bytes and plans.max_stdin_bytes, its mode, cwd,
// stdin digest and terminal settled; request.go; a replan's: Replan), and
// the active policy its API description (PolicyProto).
//
// It may import daemon/domain and lower packages (errdefs, policy,
// receiptstore, receipt, the proto package), never daemon/broker nor
// another of the broker's noun packages.
package wire
