package protocol

// MsgIDLength is the length of a message ID on the wire: a 64-bit ID as
// lowercase hex. Clients treat it as opaque text and echo it in FIN, REQ and
// TOUCH, so it must stay text even though Partita's IDs are numbers.
const MsgIDLength = 16

const hexDigits = "0123456789abcdef"

// FormatMessageID writes id as 16 lowercase hex characters into dst, which
// must hold at least MsgIDLength bytes.
func FormatMessageID(dst []byte, id uint64) {
	_ = dst[MsgIDLength-1]
	for i := MsgIDLength - 1; i >= 0; i-- {
		dst[i] = hexDigits[id&0xf]
		id >>= 4
	}
}

// ParseMessageID reads the ID parameter of FIN, REQ and TOUCH.
func ParseMessageID(param []byte) (uint64, error) {
	id, ok := parseHexID(param)
	if !ok {
		return 0, Fatal(E_INVALID, "invalid message ID")
	}
	return id, nil
}

// parseHexID accepts upper case too: a client that changed the case of an ID
// still means the same message.
func parseHexID(b []byte) (uint64, bool) {
	if len(b) != MsgIDLength {
		return 0, false
	}
	var id uint64
	for _, c := range b {
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, false
		}
		id = id<<4 | uint64(d)
	}
	return id, true
}
