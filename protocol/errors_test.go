package protocol

import "testing"

func TestErrorText(t *testing.T) {
	tests := []struct {
		err   *Error
		text  string
		fatal bool
	}{
		{Fatal(E_INVALID, "invalid command %s", "ASDF"), "E_INVALID invalid command ASDF", true},
		{Fatal(E_BAD_TOPIC, "E_BAD_TOPIC MPUB topic name %q is not valid", "a:b"),
			`E_BAD_TOPIC E_BAD_TOPIC MPUB topic name "a:b" is not valid`, true},
		{NonFatal(E_FIN_FAILED, "FIN %s failed %s", "0123456789abcdef", "ID not in flight"),
			"E_FIN_FAILED FIN 0123456789abcdef failed ID not in flight", false},
		{NonFatal(E_FAILED_ON_NOT_LEADER, "not leader"), "E_FAILED_ON_NOT_LEADER not leader", false},
	}
	for _, tt := range tests {
		wantProtocolError(t, tt.err, tt.text, tt.fatal)
	}
}
