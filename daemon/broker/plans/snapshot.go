package plans

import (
	"google.golang.org/protobuf/reflect/protoreflect"

	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// Snapshot is p as it is now, for an event or a journal record: a new Plan
// holding p's own fields and sharing its sub-messages (request, decision,
// preview, limits, requester, approval, denial, timestamps). A plan's
// sub-messages are replaced, never written into (Move, Approve, Deny and
// Flag set new ones), so what a snapshot shares does not change under it.
// A deep copy (proto.Clone) made every event of a plan hold its own copy
// of the request and decision: at 32 clients those copies, held by the
// event rings, were a quarter of termd's live heap.
func Snapshot(p *termdv1.Plan) *termdv1.Plan {
	s := new(termdv1.Plan)
	dst := s.ProtoReflect()
	p.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		dst.Set(fd, v)
		return true
	})
	return s
}
