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
	s := &sizer{}
	s.field, s.entry = s.addField, s.addEntry // one closure each per event, not per message
	s.message(m)
	return s.n
}

// sizer sums heapSize over an event's messages.
type sizer struct {
	n     int
	field func(protoreflect.FieldDescriptor, protoreflect.Value) bool
	entry func(protoreflect.MapKey, protoreflect.Value) bool
	mapFD protoreflect.FieldDescriptor // the map field entry is called for
}

func (s *sizer) message(m protoreflect.Message) {
	s.n += roundAlloc(int(reflect.TypeOf(m.Interface()).Elem().Size()))
	m.Range(s.field)
}

func (s *sizer) addField(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
	if o := fd.ContainingOneof(); o != nil && !o.IsSynthetic() {
		s.n += 16 // the oneof's wrapper struct
	}
	switch {
	case fd.IsList():
		l := v.List()
		s.n += roundAlloc(l.Len() * elemWords(fd))
		for i := range l.Len() {
			s.value(fd, l.Get(i))
		}
	case fd.IsMap():
		outer := s.mapFD
		s.mapFD = fd
		v.Map().Range(s.entry)
		s.mapFD = outer
	default:
		s.value(fd, v)
	}
	return true
}

func (s *sizer) addEntry(k protoreflect.MapKey, v protoreflect.Value) bool {
	fd := s.mapFD
	s.n += 48 // the entry's share of the map's buckets
	s.value(fd.MapKey(), k.Value())
	s.value(fd.MapValue(), v)
	return true
}

// value adds what one value holds outside the struct or array slot that
// refers to it.
func (s *sizer) value(fd protoreflect.FieldDescriptor, v protoreflect.Value) {
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		s.message(v.Message())
	case protoreflect.StringKind:
		s.n += roundAlloc(len(v.String()))
	case protoreflect.BytesKind:
		s.n += roundAlloc(len(v.Bytes()))
	}
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
