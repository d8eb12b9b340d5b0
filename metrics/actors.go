package metrics

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/partitamq/partita/actors/dispatch"
	"github.com/prometheus/client_golang/prometheus"
)

// ActorKinds are the kinds of actor a node runs, each measured apart.
var ActorKinds = []string{"partition", "channel", "replica"}

// actorMetrics measures the actor system per actor kind: messages queued in
// mailboxes and the time each message takes to process.
type actorMetrics struct {
	queued  *prometheus.GaugeVec
	receive *prometheus.HistogramVec
}

func newActorMetrics(node prometheus.Labels) *actorMetrics {
	a := &actorMetrics{
		queued: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name:        "partita_actor_mailbox_messages",
			Help:        "Messages posted to the mailboxes of this kind of actor and not yet processed, summed over its actors.",
			ConstLabels: node,
		}, []string{"kind"}),
		receive: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:        "partita_actor_receive_duration_seconds",
			Help:        "Time an actor of this kind spends processing one message; the count is the messages processed.",
			Buckets:     prometheus.ExponentialBuckets(1e-6, 4, 12),
			ConstLabels: node,
		}, []string{"kind"}),
	}
	for _, k := range ActorKinds {
		a.queued.WithLabelValues(k)
		a.receive.WithLabelValues(k)
	}
	return a
}

func (a *actorMetrics) Describe(ch chan<- *prometheus.Desc) {
	a.queued.Describe(ch)
	a.receive.Describe(ch)
}

func (a *actorMetrics) Collect(ch chan<- prometheus.Metric) {
	a.queued.Collect(ch)
	a.receive.Collect(ch)
}

// ActorProps are the props options that measure an actor of this kind: an
// unbounded mailbox that counts what is queued (dispatch.Mailbox, which a
// publishing session can run on its own goroutine), and a receive
// middleware that times each message.
func (m *Metrics) ActorProps(kind string) []actor.PropsOption {
	queued := m.actors.queued.WithLabelValues(kind)
	took := m.actors.receive.WithLabelValues(kind)
	return []actor.PropsOption{
		actor.WithMailbox(dispatch.NewMailbox(mailboxCounter{queued})),
		actor.WithReceiverMiddleware(func(next actor.ReceiverFunc) actor.ReceiverFunc {
			return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
				start := time.Now()
				next(c, env)
				took.Observe(time.Since(start).Seconds())
			}
		}),
	}
}

// mailboxCounter counts messages in and out of mailboxes; the mailbox calls
// it from senders' goroutines and the actor's, so it only touches a gauge.
type mailboxCounter struct{ queued prometheus.Gauge }

func (m mailboxCounter) MailboxStarted()     {}
func (m mailboxCounter) MessagePosted(any)   { m.queued.Inc() }
func (m mailboxCounter) MessageReceived(any) { m.queued.Dec() }
func (m mailboxCounter) MailboxEmpty()       {}
