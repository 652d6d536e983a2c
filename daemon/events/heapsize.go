package events

import (
	"reflect"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// heapSize estimates the Go heap an event holds: each message's generated
// struct (its state, size cache, unknown fields and field words, as the
// type's size) and each oneof wrapper, strings' and bytes' data, lists'
// backing arrays and map entries, each allocation rounded up to 16 bytes.
// proto.Size, the encoded length, undercounts a message of short strings
// and nested messages by half or more: a `pwd` plan's event encodes in
// ~1.4 KB and holds ~3.4 KB, so the rings' byte budgets (Options) held
// over twice what they said (issue 35). Bytes fields (output) cost what
// they encode to.
func heapSize(m protoreflect.Message) int {
	n := roundAlloc(int(reflect.TypeOf(m.Interface()).Elem().Size()))
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.ContainingOneof() != nil && !fd.ContainingOneof().IsSynthetic() {
			n += 16 // the oneof's wrapper struct
		}
		switch {
		case fd.IsList():
			l := v.List()
			n += roundAlloc(l.Len() * elemWords(fd))
			for i := range l.Len() {
				n += valueHeap(fd, l.Get(i))
			}
		case fd.IsMap():
			v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				n += 48 + valueHeap(fd.MapKey(), k.Value()) + valueHeap(fd.MapValue(), mv)
				return true
			})
		default:
			n += valueHeap(fd, v)
		}
		return true
	})
	return n
}

// valueHeap is what one value holds outside the struct or array slot that
// refers to it.
func valueHeap(fd protoreflect.FieldDescriptor, v protoreflect.Value) int {
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return heapSize(v.Message())
	case protoreflect.StringKind:
		return roundAlloc(len(v.String()))
	case protoreflect.BytesKind:
		return roundAlloc(len(v.Bytes()))
	}
	return 0
}

// elemWords is the size of one slot of a list's backing array.
func elemWords(fd protoreflect.FieldDescriptor) int {
	switch fd.Kind() {
	case protoreflect.StringKind:
		return 16
	case protoreflect.BytesKind:
		return 24
	}
	return 8
}

func roundAlloc(n int) int { return (n + 15) &^ 15 }
