package vt

import "unicode/utf8"

// The parser is a byte-driven state machine after the DEC VT500 model
// (ground, escape, CSI, control strings). It keeps its state between calls,
// so a sequence or a UTF-8 character split across writes is read whole. It
// calls a handler for each complete action, which lets the emulator and
// Sanitize share one reading of the byte stream.

type handler interface {
	print(r rune)
	execute(b byte) // a C0 control other than ESC, CAN, SUB
	escDispatch(inter []byte, final byte)
	csiDispatch(private byte, params []int, inter []byte, final byte)
	oscDispatch(data []byte)
}

type pstate uint8

const (
	sGround pstate = iota
	sEscape
	sEscInter
	sCSIEntry
	sCSIParam
	sCSIInter
	sCSIIgnore
	sOSC    // operating system command: kept (titles)
	sString // DCS, SOS, PM, APC: swallowed
)

const (
	maxParams   = 16
	maxParamVal = 65535
	maxInter    = 2
	maxOSC      = 4096
)

type parser struct {
	state   pstate
	strEsc  bool // an ESC inside a control string: ST if a '\' follows
	private byte
	params  [maxParams]int
	nparams int
	inParam bool // digits seen for the current parameter
	inter   [maxInter]byte
	ninter  int
	osc     []byte
	u8      [utf8.UTFMax]byte
	nu8     int // bytes of a UTF-8 character collected so far
	need    int // bytes that character takes in all
}

func (p *parser) clear() {
	p.private = 0
	p.nparams = 0
	p.inParam = false
	p.ninter = 0
}

// feed runs the bytes through the state machine.
func (p *parser) feed(h handler, data []byte) {
	for _, b := range data {
		p.step(h, b)
	}
}

func (p *parser) step(h handler, b byte) {
	if p.state == sOSC || p.state == sString {
		p.stringByte(h, b)
		return
	}
	if p.nu8 > 0 {
		if b&0xC0 == 0x80 {
			p.u8[p.nu8] = b
			p.nu8++
			if p.nu8 == p.need {
				r, size := utf8.DecodeRune(p.u8[:p.nu8])
				p.nu8 = 0
				if r != utf8.RuneError || size > 1 {
					h.print(r)
				}
			}
			return
		}
		p.nu8 = 0 // an incomplete character is dropped
	}
	switch b {
	case 0x18, 0x1A: // CAN, SUB abort a sequence
		p.state = sGround
		return
	case 0x1B:
		p.state = sEscape
		p.clear()
		return
	case 0x7F:
		return
	}
	if b < 0x20 {
		h.execute(b) // C0 controls act even inside a sequence
		return
	}
	switch p.state {
	case sGround:
		p.ground(h, b)
	case sEscape:
		switch {
		case b >= 0x20 && b <= 0x2F:
			p.collect(b)
			p.state = sEscInter
		case b == '[':
			p.state = sCSIEntry
		case b == ']':
			p.state = sOSC
			p.osc = p.osc[:0]
			p.strEsc = false
		case b == 'P' || b == 'X' || b == '^' || b == '_':
			p.state = sString
			p.strEsc = false
		case b >= 0x30 && b <= 0x7E:
			p.state = sGround
			if b != '\\' { // a lone ST does nothing
				h.escDispatch(nil, b)
			}
		default:
			p.state = sGround
		}
	case sEscInter:
		switch {
		case b >= 0x20 && b <= 0x2F:
			p.collect(b)
		case b >= 0x30 && b <= 0x7E:
			p.state = sGround
			h.escDispatch(p.inter[:p.ninter], b)
		default:
			p.state = sGround
		}
	case sCSIEntry, sCSIParam:
		switch {
		case b >= '0' && b <= '9':
			p.state = sCSIParam
			p.digit(b)
		case b == ';' || b == ':':
			p.state = sCSIParam
			p.nextParam()
		case b >= 0x3C && b <= 0x3F:
			if p.state == sCSIEntry {
				p.private = b
				p.state = sCSIParam
			} else {
				p.state = sCSIIgnore
			}
		case b >= 0x20 && b <= 0x2F:
			p.collect(b)
			p.state = sCSIInter
		case b >= 0x40 && b <= 0x7E:
			p.dispatchCSI(h, b)
		default:
			p.state = sCSIIgnore
		}
	case sCSIInter:
		switch {
		case b >= 0x20 && b <= 0x2F:
			p.collect(b)
		case b >= 0x40 && b <= 0x7E:
			p.dispatchCSI(h, b)
		default:
			p.state = sCSIIgnore
		}
	case sCSIIgnore:
		if b >= 0x40 && b <= 0x7E {
			p.state = sGround
		}
	}
}

func (p *parser) ground(h handler, b byte) {
	switch {
	case b < 0x80:
		h.print(rune(b))
	case b >= 0xC2 && b <= 0xDF:
		p.u8[0], p.nu8, p.need = b, 1, 2
	case b >= 0xE0 && b <= 0xEF:
		p.u8[0], p.nu8, p.need = b, 1, 3
	case b >= 0xF0 && b <= 0xF4:
		p.u8[0], p.nu8, p.need = b, 1, 4
	}
	// Other bytes are not valid UTF-8 and are dropped.
}

func (p *parser) stringByte(h handler, b byte) {
	if p.strEsc {
		p.strEsc = false
		if p.state == sOSC {
			h.oscDispatch(p.osc)
		}
		p.state = sGround
		if b == '\\' {
			return
		}
		// Any other sequence ends the string and starts afresh.
		p.state = sEscape
		p.clear()
		p.step(h, b)
		return
	}
	switch b {
	case 0x1B:
		p.strEsc = true
	case 0x07: // BEL ends an OSC (xterm); accepted for the others too
		if p.state == sOSC {
			h.oscDispatch(p.osc)
		}
		p.state = sGround
	case 0x18, 0x1A:
		p.state = sGround
	default:
		if p.state == sOSC && b >= 0x20 && len(p.osc) < maxOSC {
			p.osc = append(p.osc, b)
		}
	}
}

func (p *parser) collect(b byte) {
	if p.ninter < maxInter {
		p.inter[p.ninter] = b
		p.ninter++
	}
}

func (p *parser) digit(b byte) {
	if p.nparams == 0 {
		p.nparams = 1
		p.params[0] = 0
	}
	i := p.nparams - 1
	v := p.params[i]*10 + int(b-'0')
	if v > maxParamVal {
		v = maxParamVal
	}
	p.params[i] = v
	p.inParam = true
}

func (p *parser) nextParam() {
	if p.nparams == 0 {
		p.nparams = 1
		p.params[0] = 0
	}
	if p.nparams < maxParams {
		p.params[p.nparams] = 0
		p.nparams++
	}
}

func (p *parser) dispatchCSI(h handler, final byte) {
	p.state = sGround
	h.csiDispatch(p.private, p.params[:p.nparams], p.inter[:p.ninter], final)
}
