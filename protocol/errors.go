package protocol

import "fmt"

// Error codes sent in error frames. The names are the wire codes themselves so
// that a grep for a code seen on the wire lands here.
const (
	E_INVALID         = "E_INVALID"
	E_BAD_BODY        = "E_BAD_BODY"
	E_BAD_TOPIC       = "E_BAD_TOPIC"
	E_BAD_CHANNEL     = "E_BAD_CHANNEL"
	E_BAD_MESSAGE     = "E_BAD_MESSAGE"
	E_BAD_PROTOCOL    = "E_BAD_PROTOCOL" // the whole frame body, with no text
	E_PUB_FAILED      = "E_PUB_FAILED"
	E_MPUB_FAILED     = "E_MPUB_FAILED"
	E_DPUB_FAILED     = "E_DPUB_FAILED"
	E_FIN_FAILED      = "E_FIN_FAILED"
	E_REQ_FAILED      = "E_REQ_FAILED"
	E_TOUCH_FAILED    = "E_TOUCH_FAILED"
	E_SUB_FAILED      = "E_SUB_FAILED"
	E_IDENTIFY_FAILED = "E_IDENTIFY_FAILED"
	E_AUTH_DISABLED   = "E_AUTH_DISABLED"
	E_AUTH_FAILED     = "E_AUTH_FAILED"
	E_AUTH_ERROR      = "E_AUTH_ERROR"
	E_UNAUTHORIZED    = "E_UNAUTHORIZED"
	E_AUTH_FIRST      = "E_AUTH_FIRST"

	// Partition-aware codes from youzan/nsq. They are non-fatal so a client
	// can retry on the same connection once leadership has settled.
	E_FAILED_ON_NOT_LEADER   = "E_FAILED_ON_NOT_LEADER"
	E_FAILED_ON_NOT_WRITABLE = "E_FAILED_ON_NOT_WRITABLE"
	E_PUB_TOO_MUCH_WAITING   = "E_PUB_TOO_MUCH_WAITING"
	// A plain SUB on an ordered topic (youzan); fatal like nsqd's errors.
	E_SUB_ORDER_IS_MUST = "E_SUB_ORDER_IS_MUST"
	// youzan's message headers: a header on a topic that is not ext, a
	// header that is not a JSON object, a trace ID in it that is not a
	// decimal string (youzan's code has no E_), and an ext-aware consumer
	// of a topic that is not ext.
	E_EXT_NOT_SUPPORT      = "E_EXT_NOT_SUPPORT"
	E_INVALID_JSON_HEADER  = "E_INVALID_JSON_HEADER"
	INVALID_TRACE_ID       = "INVALID_TRACE_ID"
	E_SUB_EXTEND_FORBIDDON = "E_SUB_EXTEND_FORBIDDON"
	// SUB to a channel not created by /channel/create, on a topic created
	// with youzan's disable_channel_auto_create; fatal as in youzan.
	E_SUB_CHANNEL_NOT_REGISTERED = "E_SUB_CHANNEL_NOT_REGISTERED"
)

// Error is a client-visible protocol error. Fatal errors close the connection
// after the error frame has been written; non-fatal ones leave it open.
type Error struct {
	Code  string
	Text  string
	Fatal bool
}

// Error returns the error frame's body: the code, one space, the text.
func (e *Error) Error() string {
	return e.Code + " " + e.Text
}

// Fatal returns an error after which the server closes the connection.
func Fatal(code, format string, args ...any) *Error {
	return &Error{Code: code, Text: fmt.Sprintf(format, args...), Fatal: true}
}

// NonFatal returns an error that leaves the connection usable.
func NonFatal(code, format string, args ...any) *Error {
	return &Error{Code: code, Text: fmt.Sprintf(format, args...)}
}
