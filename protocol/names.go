package protocol

import "strings"

const (
	maxNameLength   = 64
	ephemeralSuffix = "#ephemeral"
)

// IsValidTopicName reports whether name is 1 to 64 bytes of [.a-zA-Z0-9_-],
// optionally ending in "#ephemeral" (which counts towards the 64).
func IsValidTopicName(name string) bool {
	return isValidName(name)
}

// IsValidChannelName applies the same rule as IsValidTopicName.
func IsValidChannelName(name string) bool {
	return isValidName(name)
}

// IsEphemeral reports whether a topic or channel lives only in memory and
// goes away with its last consumer.
func IsEphemeral(name string) bool {
	return strings.HasSuffix(name, ephemeralSuffix)
}

// isValidName matches ^[.a-zA-Z0-9_-]+(#ephemeral)?$ by hand: names are
// checked on every PUB, and a regexp costs more than the publish parsing.
func isValidName(name string) bool {
	if len(name) == 0 || len(name) > maxNameLength {
		return false
	}
	base := strings.TrimSuffix(name, ephemeralSuffix)
	if base == "" {
		return false
	}
	for i := 0; i < len(base); i++ {
		if !isNameByte(base[i]) {
			return false
		}
	}
	return true
}

func isNameByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return c == '.' || c == '_' || c == '-'
}
