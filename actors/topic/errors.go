package topic

// Error is a write refused or failed, with the NSQ error code the client sees.
// Local is true for errors of this node's own disk, which NSQ sessions answer
// with E_PUB_FAILED / E_MPUB_FAILED / E_DPUB_FAILED instead of Code.
//
// Elsewhere marks a refusal for a partition this node does not lead (or
// no longer does) that wrote nothing: the publish took no ID and no byte
// of the log, so it may go on to the partition's next leader as if it
// had never come here.
type Error struct {
	Code      string
	Text      string
	Local     bool
	Elsewhere bool
}

func (e *Error) Error() string { return e.Code + " " + e.Text }

// Is makes the refusals and failures of a replica that does not lead, or
// no longer does, ErrNotLeader to errors.Is.
func (e *Error) Is(target error) bool {
	return target == ErrNotLeader && (e == ErrLedElsewhere || e == ErrDeposed || e == ErrLeadershipEnded)
}

// The write flow's refusals (docs/replication.md#write-gates).
var (
	ErrNotLeader = &Error{Code: "E_FAILED_ON_NOT_LEADER", Text: "not the partition leader"}
	// ErrLedElsewhere refuses a publish that reached a replica which does
	// not lead, as another does: ErrNotLeader, known to have written
	// nothing.
	ErrLedElsewhere = &Error{Code: "E_FAILED_ON_NOT_LEADER", Text: "not the partition leader", Elsewhere: true}
	// ErrDeposed refuses the publishes a leader had queued, not yet
	// written, when its leadership ended.
	ErrDeposed = &Error{Code: "E_FAILED_ON_NOT_LEADER", Text: "leadership ended before the write", Elsewhere: true}
	// ErrLeadershipEnded fails the writes a leader had in flight when its
	// leadership ended: written here and maybe on the next leader, whose
	// log decides whether they survive, so they go nowhere else.
	ErrLeadershipEnded = &Error{Code: "E_FAILED_ON_NOT_LEADER", Text: "leadership ended with the write in flight"}
	ErrNotWritable     = &Error{Code: "E_FAILED_ON_NOT_WRITABLE", Text: "partition write disabled"}
	ErrWriteQuorum     = &Error{Code: "E_FAILED_ON_NOT_WRITABLE", Text: "not enough replicas in ISR"}
	ErrWriteTimeout    = &Error{Code: "E_FAILED_ON_NOT_WRITABLE", Text: "write timed out waiting for replicas"}
	ErrTooMuchWaiting  = &Error{Code: "E_PUB_TOO_MUCH_WAITING", Text: "too many publishes waiting"}
	// ErrDeadlinePassed refuses a forwarded publish that could not take its
	// place in the log before its forwarder's deadline. It says "not
	// writable" because that is what a client retries elsewhere.
	ErrDeadlinePassed = &Error{Code: "E_FAILED_ON_NOT_WRITABLE", Text: "forwarded publish past its deadline"}
	// ErrEarlierLeadership refuses a forwarded publish sent to an earlier
	// leadership of this node. "Not leader" is what the forwarder's
	// client retries, with a fresher view of who leads.
	ErrEarlierLeadership = &Error{Code: "E_FAILED_ON_NOT_LEADER", Text: "forwarded to an earlier leadership"}
	ErrExiting           = &Error{Code: "E_PUB_FAILED", Text: "exiting", Local: true}
)

func localError(err error) *Error {
	return &Error{Code: "E_PUB_FAILED", Text: err.Error(), Local: true}
}
