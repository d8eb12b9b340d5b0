package dispatch

import (
	"runtime"
	"sync"

	"github.com/asynkron/protoactor-go/actor"
)

// Mailbox is an actor mailbox that a sender can run on its own goroutine.
//
// A client publishing one message at a time leaves the node idle between
// messages, and on two or more cores every goroutine the message wakes on
// the way (the partition's worker, the session's writer) wakes an idle
// thread as well, each a context switch. When the session's reader posts a
// publish to an idle partition with a Here, it runs the partition's turn
// itself: read, write and answer on one thread. The turn it gets is bounded
// (see PostUserMessage), so a reader never becomes the partition's worker for
// other sessions' traffic. Everything else behaves as protoactor's default
// mailbox: system messages first, suspension by the supervisor, a turn of
// at most throughput messages before other goroutines run.
type Mailbox struct {
	mu        sync.Mutex
	sys       queue
	user      queue
	scheduled bool // a turn is due or under way; at most one at a time
	suspended bool
	// here: the turn due or under way is a sender's (Here); budget is how
	// many more user messages it may handle, handled how many it has.
	here            bool
	budget, handled int

	invoker     actor.MessageInvoker
	dispatcher  actor.Dispatcher
	middlewares []actor.MailboxMiddleware
}

// NewMailbox makes Mailboxes with these middlewares, as actor.Unbounded does.
func NewMailbox(middlewares ...actor.MailboxMiddleware) actor.MailboxProducer {
	return func() actor.Mailbox { return &Mailbox{middlewares: middlewares} }
}

func (m *Mailbox) RegisterHandlers(invoker actor.MessageInvoker, dispatcher actor.Dispatcher) {
	m.invoker, m.dispatcher = invoker, dispatcher
}

func (m *Mailbox) Start() {
	for _, mw := range m.middlewares {
		mw.MailboxStarted()
	}
}

func (m *Mailbox) UserMessageCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.user.len()
}

// Here is a sender's offer to run, on its own goroutine, the turn its
// message starts, and the turns of idle actors that turn sends to with the
// same Here (a partition passing a publish's Here to its channels). The
// sender puts it in a message that returns it from RunsHere, sends the
// message, and calls Run once it holds no lock the actors might need.
type Here struct {
	mu     sync.Mutex
	runs   []func()
	closed bool
}

// offer adds a turn for Run; false once Run has finished, so a Here kept
// past its turns never strands one.
func (h *Here) offer(run func()) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return false
	}
	h.runs = append(h.runs, run)
	return true
}

// Run runs the turns offered to the Here, and those they offer in turn;
// without a Mailbox, or with every turn already due elsewhere, there is
// nothing to run.
func (h *Here) Run() {
	for {
		h.mu.Lock()
		if len(h.runs) == 0 {
			h.closed = true
			h.mu.Unlock()
			return
		}
		run := h.runs[0]
		h.runs = h.runs[1:]
		h.mu.Unlock()
		run()
	}
}

// Offering is a message that carries a Here.
type Offering interface{ RunsHere() *Here }

func (m *Mailbox) PostUserMessage(msg any) {
	var h *Here
	if o, ok := actor.UnwrapEnvelopeMessage(msg).(Offering); ok {
		h = o.RunsHere()
	}
	if !m.post(msg, false, h != nil) {
		return
	}
	if h != nil && h.offer(func() { m.drain(true) }) {
		return
	}
	m.endHere()
	m.dispatcher.Schedule(m.process)
}

func (m *Mailbox) PostSystemMessage(msg any) {
	if m.post(msg, true, false) {
		m.dispatcher.Schedule(m.process)
	}
}

// endHere makes the turn due a dispatcher's: its Here was closed.
func (m *Mailbox) endHere() {
	m.mu.Lock()
	m.here = false
	m.mu.Unlock()
}

// maxHereTurn bounds the user messages a sender's turn handles.
const maxHereTurn = 64

// post queues msg and reports whether the caller must start a turn; here
// asks for a sender's turn, which handles the user messages queued with
// msg and those posted while it runs (the actor's own, such as a flush it
// sends itself, above all), at most maxHereTurn, and hands the rest to the
// dispatcher: the sender never becomes the actor's worker for others'
// traffic.
func (m *Mailbox) post(msg any, system, here bool) (start bool) {
	for _, mw := range m.middlewares {
		mw.MessagePosted(msg)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if system {
		m.sys.push(msg)
	} else {
		m.user.push(msg)
		if m.here {
			m.budget++
		}
	}
	if m.scheduled {
		return false
	}
	m.scheduled = true
	if here {
		m.here, m.budget, m.handled = true, m.user.len(), 0
	}
	return true
}

// process is a turn on the dispatcher.
func (m *Mailbox) process() { m.drain(false) }

// drain handles messages until none is left or the mailbox is suspended,
// or a sender's turn (here) has spent its budget; a dispatcher's turn
// yields every throughput messages. On a bounded dispatcher with runs
// waiting for a worker it yields the worker too: the turn goes to the back
// of the queue, so an actor that never runs dry cannot hold a worker while
// others wait.
func (m *Mailbox) drain(here bool) {
	turn, t := 0, m.dispatcher.Throughput()
	for {
		msg, system, ok := m.next()
		if !ok {
			return
		}
		m.invoke(msg, system)
		if turn++; !here && turn >= t {
			turn = 0
			if q, ok := m.dispatcher.(queued); ok && q.Queued() > 0 {
				m.dispatcher.Schedule(m.process) // still scheduled: the turn moves
				return
			}
			runtime.Gosched()
		}
	}
}

// queued is a dispatcher that can say how many runs wait for a worker.
type queued interface{ Queued() int }

// next takes the next message to handle, or ends the turn: when nothing is
// left, when suspended, or by scheduling the rest when a sender's turn has
// spent its budget.
func (m *Mailbox) next() (msg any, system, ok bool) {
	m.mu.Lock()
	if msg, ok = m.sys.pop(); ok {
		m.mu.Unlock()
		return msg, true, true
	}
	if !m.suspended && m.user.len() > 0 {
		if !m.here || (m.budget > 0 && m.handled < maxHereTurn) {
			if m.here {
				m.budget--
				m.handled++
			}
			msg, _ = m.user.pop()
			m.mu.Unlock()
			return msg, false, true
		}
		m.here = false
		m.mu.Unlock()
		m.dispatcher.Schedule(m.process) // still scheduled: the turn moves
		return nil, false, false
	}
	m.scheduled, m.here = false, false
	empty := m.user.len() == 0 && !m.suspended
	m.mu.Unlock()
	if empty {
		for _, mw := range m.middlewares {
			mw.MailboxEmpty()
		}
	}
	return nil, false, false
}

// invoke hands msg to the actor; a panic goes to its supervisor, which
// suspends the mailbox until it decides, as with protoactor's mailbox.
func (m *Mailbox) invoke(msg any, system bool) {
	defer func() {
		if r := recover(); r != nil {
			m.invoker.EscalateFailure(r, msg)
		}
	}()
	switch {
	case !system:
		m.invoker.InvokeUserMessage(msg)
	default:
		switch msg.(type) {
		case *actor.SuspendMailbox:
			m.setSuspended(true)
		case *actor.ResumeMailbox:
			m.setSuspended(false)
		default:
			m.invoker.InvokeSystemMessage(msg)
		}
	}
	for _, mw := range m.middlewares {
		mw.MessageReceived(msg)
	}
}

func (m *Mailbox) setSuspended(s bool) {
	m.mu.Lock()
	m.suspended = s
	m.mu.Unlock()
}

// queue is a FIFO of messages; it reuses its slice once drained, and
// moves what is left to the front when most of it has been taken.
type queue struct {
	items []any
	head  int
}

func (q *queue) len() int { return len(q.items) - q.head }

func (q *queue) push(msg any) { q.items = append(q.items, msg) }

func (q *queue) pop() (any, bool) {
	if q.head == len(q.items) {
		return nil, false
	}
	msg := q.items[q.head]
	q.items[q.head] = nil
	q.head++
	switch {
	case q.head == len(q.items):
		q.items, q.head = q.items[:0], 0
	case q.head >= 1024 && q.head*2 >= len(q.items):
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items, q.head = q.items[:n], 0
	}
	return msg, true
}
