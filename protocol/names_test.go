package protocol

import (
	"strings"
	"testing"
)

func TestNames(t *testing.T) {
	tests := []struct {
		name      string
		valid     bool
		ephemeral bool
	}{
		{"test", true, false},
		{"test-with_period.", true, false},
		{"test#ephemeral", true, true},
		{"test:ephemeral", false, false},
		{"", false, false},
		{"#ephemeral", false, true},
		{"a#ephemeral#ephemeral", false, true},
		{"test#ephemera", false, false},
		{"test#Ephemeral", false, false},
		{"with space", false, false},
		{"slash/name", false, false},
		{"name$", false, false},
		{"ümlaut", false, false},
		{"ABC.xyz_09-", true, false},
		{strings.Repeat("a", 64), true, false},
		{strings.Repeat("a", 65), false, false},
		{strings.Repeat("a", 54) + "#ephemeral", true, true},
		{strings.Repeat("a", 55) + "#ephemeral", false, true},
	}
	for _, tt := range tests {
		if got := IsValidTopicName(tt.name); got != tt.valid {
			t.Errorf("IsValidTopicName(%q) = %v, want %v", tt.name, got, tt.valid)
		}
		if got := IsValidChannelName(tt.name); got != tt.valid {
			t.Errorf("IsValidChannelName(%q) = %v, want %v", tt.name, got, tt.valid)
		}
		if got := IsEphemeral(tt.name); got != tt.ephemeral {
			t.Errorf("IsEphemeral(%q) = %v, want %v", tt.name, got, tt.ephemeral)
		}
	}
}
