package protocol

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/partitamq/partita/actors/channel"
	"github.com/partitamq/partita/actors/topic"
	"github.com/partitamq/partita/broker"
	"github.com/partitamq/partita/internal/rawio"
)

// Connection states, numbered as nsqd numbers them in /stats.
const (
	stateInit       = 0
	stateSubscribed = 3
	stateClosing    = 4
)

// session is one client connection: this goroutine reads and executes
// commands; a writer goroutine (writer.go) owns every byte going out. The
// session talks to actors only by message.
type session struct {
	srv  *Server
	conn net.Conn
	id   int64
	r    *bufio.Reader
	lim  Limits
	// raw reads the connection, under r and under any TLS or compression
	// layer; Server.Close makes it stop waiting for more.
	raw      io.Reader
	stopping <-chan struct{} // the server's, closed when it begins to close

	settings atomic.Pointer[connSettings]
	state    atomic.Int32
	// framing is which of youzan's frame sections this consumer's message
	// frames carry (frameDetail, frameExt); 0 for NSQ's plain frames.
	framing atomic.Uint32
	// selector is the tag and filter IDENTIFY asked for, applied on ext
	// topics only.
	selector channel.Selector

	consumer     *channel.Consumer
	subscription *broker.Subscription // the channel actors of the partitions consumed
	topicName    string
	channel      string

	replies   *replyQueue
	pen       sync.Mutex  // held by whoever writes to the connection
	out       *connWriter // under pen
	outMu     sync.Mutex
	outItems  []outItem
	outNotify chan struct{}
	quit      chan struct{}
	written   chan struct{} // closed when the writer has stopped

	identity     atomic.Pointer[IdentifyRequest]
	connectedAt  time.Time
	messageCount atomic.Int64
	finishCount  atomic.Int64
	finReads     finReads // the reader's own
	requeueCount atomic.Int64
	pubMu        sync.Mutex
	pubCounts    map[string]int64

	tlsState  atomic.Pointer[tls.ConnectionState] // nil until upgraded
	authState atomic.Pointer[AuthState]           // nil until AUTH succeeded
	secret    string                              // for asking again after the TTL
}

// Bits of session.framing.
const (
	frameDetail uint32 = 1 << iota
	frameExt
)

// connSettings are what IDENTIFY negotiated (or the defaults).
type connSettings struct {
	heartbeat     time.Duration // 0: disabled
	msgTimeout    time.Duration
	sampleRate    int32
	outBufSize    int64
	outBufTimeout time.Duration
	snappy        bool
	deflate       bool
}

// reply is one answer, written in the order its command arrived.
type reply struct {
	pending   bool // its frame is set later (a publish's); under replyQueue.mu
	frameType int32
	data      []byte
	fatal     bool
	identify  *Negotiated   // settings to apply once the frame is written
	applied   chan struct{} // closed after identify took effect
	newReader io.Reader     // set by the writer for a compression upgrade
}

// special: only the writer goroutine may write it.
func (r *reply) special() bool { return r.fatal || r.identify != nil }

func newSession(srv *Server, conn net.Conn, id int64) *session {
	s := &session{
		srv:         srv,
		conn:        conn,
		id:          id,
		lim:         srv.Limits,
		raw:         rawio.Reader(conn),
		replies:     newReplyQueue(),
		outNotify:   make(chan struct{}, 1),
		quit:        make(chan struct{}),
		written:     make(chan struct{}),
		connectedAt: time.Now(),
		pubCounts:   make(map[string]int64),
		finReads:    finReads{delay: srv.Limits.FINReadDelay},
	}
	s.settings.Store(&connSettings{
		heartbeat:     s.lim.ClientTimeout / 2,
		msgTimeout:    s.lim.MsgTimeout,
		outBufSize:    16 * 1024,
		outBufTimeout: s.lim.OutputBufferTimeout,
	})
	s.r = bufio.NewReaderSize(s.raw, 16*1024)
	s.out = &connWriter{s: s, raw: conn, bw: bufio.NewWriterSize(rawio.Writer(conn), int(s.settings.Load().outBufSize))}
	return s
}

func (s *session) run() {
	defer s.conn.Close()
	if !s.readMagic() {
		return
	}
	go s.writeLoop()
	defer s.unsubscribe()
	for {
		s.armReadDeadline()
		cmd, err := ReadCommand(s.r)
		if err != nil {
			close(s.quit)
			<-s.written
			return
		}
		if err := s.exec(cmd); err != nil {
			var perr *Error
			if !errors.As(err, &perr) {
				perr = Fatal(E_INVALID, "%s", err.Error())
			}
			s.send(&reply{frameType: FrameTypeError, data: []byte(perr.Error()), fatal: perr.Fatal})
			if perr.Fatal {
				<-s.written
				return
			}
		}
		if cmd.Name == "FIN" {
			s.afterFIN()
		}
	}
}

// armReadDeadline bounds the next read by the heartbeat.
func (s *session) armReadDeadline() {
	if hb := s.settings.Load().heartbeat; hb > 0 {
		s.conn.SetReadDeadline(time.Now().Add(2 * hb))
	} else {
		s.conn.SetReadDeadline(time.Time{})
	}
}

// stopReading makes the session read what its client had sent by now and
// then end: a read waiting for more is woken, and no read waits again.
// Where reads are not raw (outside Linux) the woken read fails instead.
func (s *session) stopReading() {
	if st, ok := s.raw.(interface{ StopWaiting() }); ok {
		st.StopWaiting()
	}
	s.conn.SetReadDeadline(time.Now())
}

func (s *session) readMagic() bool {
	s.conn.SetReadDeadline(time.Now().Add(s.lim.ClientTimeout))
	magic := make([]byte, 4)
	if _, err := io.ReadFull(s.r, magic); err != nil {
		return false
	}
	if string(magic) != MagicV2 {
		s.conn.SetWriteDeadline(time.Now().Add(time.Second))
		WriteFrame(s.conn, FrameTypeError, []byte(E_BAD_PROTOCOL))
		return false
	}
	return true
}

// send queues a reply behind those already queued; it gives up when the
// writer has stopped.
func (s *session) send(r *reply) {
	s.replies.add(r, s.written)
}

func (s *session) ok() {
	s.send(&reply{frameType: FrameTypeResponse, data: okBytes})
}

var okBytes = []byte("OK")

func (s *session) exec(cmd Command) error {
	if s.srv.TLSRequired && cmd.Name != "IDENTIFY" && s.tlsState.Load() == nil {
		return Fatal(E_INVALID, "cannot %s in current state (TLS required)", cmd.Name)
	}
	switch cmd.Name {
	case "FIN":
		return s.fin(cmd.Params)
	case "RDY":
		return s.rdy(cmd.Params)
	case "REQ":
		return s.req(cmd.Params)
	case "PUB":
		return s.pub(cmd.Params)
	case "MPUB":
		return s.mpub(cmd.Params)
	case "DPUB":
		return s.dpub(cmd.Params)
	case "PUB_TRACE":
		return s.pubTrace(cmd.Params)
	case "MPUB_TRACE":
		return s.mpubTrace(cmd.Params)
	case "PUB_EXT":
		return s.pubExt(cmd.Params)
	case "MPUB_EXT":
		return s.mpubExt(cmd.Params)
	case "NOP":
		return nil
	case "TOUCH":
		return s.touch(cmd.Params)
	case "SUB":
		return s.sub(cmd.Params, false, false)
	case "SUB_ORDERED":
		return s.sub(cmd.Params, true, true)
	case "SUB_ADVANCED":
		return s.subAdvanced(cmd.Params)
	case "CLS":
		return s.cls()
	case "IDENTIFY":
		return s.identify()
	case "AUTH":
		return s.auth(cmd.Params)
	}
	return Fatal(E_INVALID, "invalid command %s", cmd.Name)
}

func (s *session) identify() error {
	if s.state.Load() != stateInit {
		return Fatal(E_INVALID, "cannot IDENTIFY in current state")
	}
	body, err := ReadIdentifyBody(s.r, s.lim.MaxBodySize)
	if err != nil {
		return err
	}
	n, err := NegotiateIdentify(body, s.lim)
	if err != nil {
		return err
	}
	req := n.Request
	s.identity.Store(&req)
	s.selector = channel.Selector{Tag: req.DesiredTag, Filter: n.Filter}
	r := &reply{frameType: FrameTypeResponse, data: n.Response, identify: &n, applied: make(chan struct{})}
	s.send(r)
	select {
	case <-r.applied:
	case <-s.written:
		return nil
	}
	if r.newReader != nil {
		s.r = bufio.NewReaderSize(r.newReader, 16*1024)
	}
	return nil
}

// sub is SUB, and youzan's SUB_ORDERED <topic> <channel> <partition>:
// one partition, delivered one message at a time, each FIN confirmed on
// every ISR member. detail puts each message's queue offset and size in its
// frame, as youzan does for its ordered and traced subscriptions.
func (s *session) sub(params [][]byte, ordered, detail bool) error {
	cmd := "SUB"
	if ordered {
		cmd = "SUB_ORDERED"
	}
	if s.state.Load() != stateInit {
		return Fatal(E_INVALID, "cannot %s in current state", cmd)
	}
	if s.settings.Load().heartbeat <= 0 {
		return Fatal(E_INVALID, "cannot %s with heartbeats disabled", cmd)
	}
	if len(params) < 2 || (ordered && len(params) < 3) {
		return Fatal(E_INVALID, "%s insufficient number of parameters", cmd)
	}
	topicName, chanName := string(params[0]), string(params[1])
	if !IsValidTopicName(topicName) {
		return Fatal(E_BAD_TOPIC, "%s topic name %q is not valid", cmd, topicName)
	}
	if !IsValidChannelName(chanName) {
		return Fatal(E_BAD_CHANNEL, "%s channel name %q is not valid", cmd, chanName)
	}
	if err := s.checkAuth(cmd, PermissionSubscribe, topicName, chanName); err != nil {
		return err
	}
	only := int32(-1)
	if len(params) > 2 {
		p, err := strconv.ParseInt(string(params[2]), 10, 32)
		if err != nil || p < 0 {
			return Fatal(E_INVALID, "%s invalid partition %s", cmd, params[2])
		}
		only = int32(p)
	}
	ctx, cancel := metadataContext()
	defer cancel()
	// An ephemeral topic going with its last channel as this SUB opens it
	// is made anew and subscribed to, as nsqd's SUB retries a topic found
	// exiting.
	var t *broker.Topic
	var sub *broker.Subscription
	for attempt := 1; ; attempt++ {
		var err error
		t, sub, err = s.subscribeTo(ctx, cmd, topicName, chanName, only, ordered, detail)
		if err == nil {
			break
		}
		if !errors.Is(err, broker.ErrTopicGone) {
			return err
		}
		if attempt == 3 {
			return Fatal(E_SUB_FAILED, "%s failed %s", cmd, err)
		}
	}
	if ordered {
		if err := s.srv.Broker.SetChannelOrdered(ctx, t, chanName, true); err != nil {
			s.srv.Broker.Unsubscribe(ctx, sub)
			return Fatal(E_SUB_FAILED, "%s failed %s", cmd, err)
		}
	}
	s.subscription = sub
	s.topicName, s.channel = topicName, chanName
	s.state.Store(stateSubscribed)
	s.ok()
	return nil
}

// subscribeTo opens the topic and the channel for a SUB and subscribes the
// session's consumer; broker.ErrTopicGone is returned as is, for the SUB
// to ask again.
func (s *session) subscribeTo(ctx context.Context, cmd, topicName, chanName string, only int32, ordered, detail bool) (*broker.Topic, *broker.Subscription, error) {
	t, err := s.srv.Broker.CreateTopic(ctx, topicName, 0)
	if err != nil {
		return nil, nil, Fatal(E_SUB_FAILED, "SUB failed %s", err)
	}
	if t.Ordered && !ordered {
		return nil, nil, Fatal(E_SUB_ORDER_IS_MUST, "SUB topic %q is ordered: use SUB_ORDERED", topicName)
	}
	if only >= 0 && !t.Leads(int(only)) {
		return nil, nil, NonFatal(E_FAILED_ON_NOT_LEADER, "%s partition %d not led by this node", cmd, only)
	}
	extAware := false
	if id := s.identity.Load(); id != nil {
		extAware = id.ExtendSupport
	}
	if extAware && !t.Ext() {
		// youzan's client would read a header section that never comes.
		return nil, nil, Fatal(E_SUB_EXTEND_FORBIDDON, "%s topic %q is not ext: do not identify with extend_support", cmd, topicName)
	}
	// Set before the first delivery can reach the writer.
	var framing uint32
	if detail {
		framing |= frameDetail
	}
	if extAware {
		framing |= frameExt
	}
	s.framing.Store(framing)
	s.consumer = &channel.Consumer{ID: s.id, MsgTimeout: s.settings.Load().msgTimeout, Out: s,
		ClientID: s.clientID(), Addr: s.conn.RemoteAddr().String()}
	if t.Ext() {
		// youzan drops the tag of a consumer of a topic that is not ext.
		s.consumer.Select = s.selector
	}
	sub, err := s.srv.Broker.Subscribe(ctx, t, chanName, s.consumer, only)
	if errors.Is(err, broker.ErrChannelNotRegistered) {
		return nil, nil, Fatal(E_SUB_CHANNEL_NOT_REGISTERED, "%s failed %s", cmd, err)
	}
	if errors.Is(err, broker.ErrTopicGone) {
		return nil, nil, err
	}
	if err != nil {
		return nil, nil, Fatal(E_SUB_FAILED, "%s failed %s", cmd, err)
	}
	return t, sub, nil
}

func (s *session) unsubscribe() {
	if s.subscription == nil {
		return
	}
	s.consumer.SetRDY(0)
	ctx, cancel := metadataContext()
	defer cancel()
	s.srv.Broker.Unsubscribe(ctx, s.subscription)
}

func (s *session) rdy(params [][]byte) error {
	st := s.state.Load()
	if st == stateClosing {
		return nil
	}
	if st != stateSubscribed {
		return Fatal(E_INVALID, "cannot RDY in current state")
	}
	n, err := ParseRDY(params, s.lim.MaxRdyCount)
	if err != nil {
		return err
	}
	if s.consumer.SetRDY(n) {
		s.wake()
	}
	return nil
}

// wake tells every consumed channel that the window has room.
func (s *session) wake() {
	for _, pid := range s.consumer.Channels() {
		s.srv.Broker.System().Root.Send(pid, &channel.WindowOpened{})
	}
}

// messageCommand checks what FIN, REQ and TOUCH share and finds the
// channel actor of the message's partition.
func (s *session) messageCommand(name string, params [][]byte, need int) (uint64, *actor.PID, error) {
	if st := s.state.Load(); st != stateSubscribed && st != stateClosing {
		return 0, nil, Fatal(E_INVALID, "cannot %s in current state", name)
	}
	if len(params) < need {
		return 0, nil, Fatal(E_INVALID, "%s insufficient number of params", name)
	}
	id, err := ParseMessageID(params[0])
	if err != nil {
		return 0, nil, err
	}
	return id, s.subscription.PID(topic.PartitionOf(id)), nil
}

func (s *session) fin(params [][]byte) error {
	id, pid, err := s.messageCommand("FIN", params, 1)
	if err != nil {
		return err
	}
	if pid == nil {
		return NonFatal(E_FIN_FAILED, "FIN %s failed %s", params[0], channel.ErrNotInFlight)
	}
	s.finishCount.Add(1)
	s.srv.Broker.System().Root.Send(pid, &channel.Finished{ConsumerID: s.id, ID: id, Out: s})
	return nil
}

func (s *session) req(params [][]byte) error {
	id, pid, err := s.messageCommand("REQ", params, 2)
	if err != nil {
		return err
	}
	delay, err := ParseReqTimeout(params[1])
	if err != nil {
		return err
	}
	delay = min(delay, s.lim.MaxReqTimeout)
	if pid == nil {
		return NonFatal(E_REQ_FAILED, "REQ %s failed %s", params[0], channel.ErrNotInFlight)
	}
	s.requeueCount.Add(1)
	s.srv.Broker.System().Root.Send(pid, &channel.Requeued{ConsumerID: s.id, ID: id, Delay: delay, Out: s})
	return nil
}

func (s *session) touch(params [][]byte) error {
	id, pid, err := s.messageCommand("TOUCH", params, 1)
	if err != nil {
		return err
	}
	if pid == nil {
		return NonFatal(E_TOUCH_FAILED, "TOUCH %s failed %s", params[0], channel.ErrNotInFlight)
	}
	s.srv.Broker.System().Root.Send(pid, &channel.Touched{ConsumerID: s.id, ID: id, Out: s})
	return nil
}

func (s *session) cls() error {
	if s.state.Load() != stateSubscribed {
		return Fatal(E_INVALID, "cannot CLS in current state")
	}
	s.consumer.SetRDY(0)
	s.state.Store(stateClosing)
	s.send(&reply{frameType: FrameTypeResponse, data: []byte("CLOSE_WAIT")})
	return nil
}

// checkTopic validates a publish's parameters and topic name.
func checkTopic(cmd string, params [][]byte, need int) error {
	if len(params) < need {
		return Fatal(E_INVALID, "%s insufficient number of parameters", cmd)
	}
	name := string(params[0])
	if IsValidTopicName(name) {
		return nil
	}
	if cmd == "MPUB" {
		// nsqd repeats the code in this one text.
		return Fatal(E_BAD_TOPIC, "%s MPUB topic name %q is not valid", E_BAD_TOPIC, name)
	}
	return Fatal(E_BAD_TOPIC, "%s topic name %q is not valid", cmd, name)
}

// createTopic creates a published-to topic, as nsqd does.
func (s *session) createTopic(cmd, name string) (*broker.Topic, error) {
	if t := s.srv.Broker.Topic(name); t != nil {
		return t, nil // the common case: no context, no timer
	}
	ctx, cancel := metadataContext()
	defer cancel()
	t, err := s.srv.Broker.CreateTopic(ctx, name, 0)
	if err != nil {
		return nil, Fatal("E_"+cmd+"_FAILED", "%s failed %s", cmd, err)
	}
	return t, nil
}

// MetadataTimeout bounds a command's wait on the cluster's metadata (etcd),
// so an unreachable etcd fails the command instead of hanging it.
const MetadataTimeout = 5 * time.Second

func metadataContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), MetadataTimeout)
}

func (s *session) pub(params [][]byte) error {
	if err := checkTopic("PUB", params, 1); err != nil {
		return err
	}
	body, err := ReadMessageBody(s.r, "PUB", s.lim.MaxMsgSize)
	if err != nil {
		return err
	}
	if err := s.checkAuth("PUB", PermissionPublish, string(params[0]), ""); err != nil {
		return err
	}
	t, err := s.createTopic("PUB", string(params[0]))
	if err != nil {
		return err
	}
	s.publish("PUB", t, partitionParam(params, 1), [][]byte{body}, 0)
	return nil
}

func (s *session) mpub(params [][]byte) error {
	t, bodies, err := s.readMPUB("MPUB", params)
	if err != nil {
		return err
	}
	s.publish("MPUB", t, partitionParam(params, 1), bodies, 0)
	return nil
}

// readMPUB checks an MPUB-like command and reads its messages.
func (s *session) readMPUB(cmd string, params [][]byte) (*broker.Topic, [][]byte, error) {
	if err := checkTopic(cmd, params, 1); err != nil {
		return nil, nil, err
	}
	if err := s.checkAuth(cmd, PermissionPublish, string(params[0]), ""); err != nil {
		return nil, nil, err
	}
	// nsqd creates the topic before reading the body.
	t, err := s.createTopic("MPUB", string(params[0]))
	if err != nil {
		return nil, nil, err
	}
	bodies, err := ReadMPUBBody(s.r, s.lim.MaxBodySize, s.lim.MaxMsgSize)
	if err != nil {
		return nil, nil, err
	}
	return t, bodies, nil
}

func (s *session) dpub(params [][]byte) error {
	if err := checkTopic("DPUB", params, 2); err != nil {
		return err
	}
	delay, err := ParseDeferMS(params[1], s.lim.MaxReqTimeout)
	if err != nil {
		return err
	}
	body, err := ReadMessageBody(s.r, "DPUB", s.lim.MaxMsgSize)
	if err != nil {
		return err
	}
	if err := s.checkAuth("DPUB", PermissionPublish, string(params[0]), ""); err != nil {
		return err
	}
	t, err := s.createTopic("DPUB", string(params[0]))
	if err != nil {
		return err
	}
	var at int64
	if delay > 0 {
		at = time.Now().Add(delay).UnixNano()
	}
	s.publish("DPUB", t, partitionParam(params, 2), [][]byte{body}, at)
	return nil
}

// partitionParam reads youzan's optional partition argument.
func partitionParam(params [][]byte, i int) int {
	if len(params) <= i {
		return -1
	}
	p, err := strconv.Atoi(string(params[i]))
	if err != nil || p < 0 {
		return -1
	}
	return p
}

// publish hands the write to the partition actor and queues a reply slot
// that the actor fills, so answers keep the order of the commands.
func (s *session) publish(cmd string, t *broker.Topic, partition int, bodies [][]byte, deliverAt int64) {
	r := &reply{pending: true, frameType: FrameTypeResponse, data: okBytes}
	s.send(r)
	s.pubMu.Lock()
	s.pubCounts[t.Name] += int64(len(bodies))
	s.pubMu.Unlock()
	answer := func(res topic.Reply) {
		if res.Err != nil {
			e := publishError(cmd, res.Err)
			r.frameType, r.data, r.fatal = FrameTypeError, []byte(e.Error()), e.Fatal
		}
		s.answered(r)
	}
	if s.r.Buffered() > 0 {
		// More commands wait: hand the publish over and read on, so the
		// partitions they go to work at once.
		s.srv.Broker.Publish(t, partition, bodies, deliverAt, answer)
		return
	}
	// This reader would sleep next: an idle partition takes the publish on
	// this goroutine, and its answer, with any other that became ready
	// meanwhile, is written from here too, without waking the writer.
	s.replies.hold()
	s.srv.Broker.PublishHere(t, partition, bodies, deliverAt, answer)
	if s.replies.release() {
		s.answerNow()
	}
}

// publishError maps a write failure to what nsqd or youzan would answer:
// local failures are nsqd's fatal E_<CMD>_FAILED, cluster ones non-fatal.
func publishError(cmd string, err *topic.Error) *Error {
	if err.Local {
		return Fatal("E_"+cmd+"_FAILED", "%s failed %s", cmd, err.Text)
	}
	return NonFatal(err.Code, "%s %s", cmd, err.Text)
}

// Deliver, Refused and ChannelGone make the session a channel.Outbox. They
// run on channel actors' goroutines and never block.
func (s *session) Deliver(_ string, _ int32, ds []channel.Delivery) {
	s.push(outItem{deliveries: ds})
}

func (s *session) Refused(cmd string, id uint64, err error) {
	var idText [16]byte
	FormatMessageID(idText[:], id)
	code := map[string]string{"FIN": E_FIN_FAILED, "REQ": E_REQ_FAILED, "TOUCH": E_TOUCH_FAILED}[cmd]
	e := NonFatal(code, "%s %s failed %s", cmd, idText[:], err)
	s.push(outItem{errFrame: []byte(e.Error())})
}

func (s *session) ChannelGone() {
	s.push(outItem{closeConn: true})
}

func (s *session) push(it outItem) {
	s.outMu.Lock()
	s.outItems = append(s.outItems, it)
	s.outMu.Unlock()
	select {
	case s.outNotify <- struct{}{}:
	default:
	}
}

// ClientStats is one connection in nsqd's /stats shape.
type ClientStats struct {
	ClientID                      string     `json:"client_id"`
	Hostname                      string     `json:"hostname"`
	Version                       string     `json:"version"`
	RemoteAddress                 string     `json:"remote_address"`
	State                         int32      `json:"state"`
	ReadyCount                    int64      `json:"ready_count"`
	InFlightCount                 int64      `json:"in_flight_count"`
	MessageCount                  int64      `json:"message_count"`
	FinishCount                   int64      `json:"finish_count"`
	RequeueCount                  int64      `json:"requeue_count"`
	ConnectTS                     int64      `json:"connect_ts"`
	SampleRate                    int32      `json:"sample_rate"`
	Deflate                       bool       `json:"deflate"`
	Snappy                        bool       `json:"snappy"`
	UserAgent                     string     `json:"user_agent"`
	TopologyZone                  string     `json:"topology_zone"`
	TopologyRegion                string     `json:"topology_region"`
	PubCounts                     []PubCount `json:"pub_counts,omitempty"`
	TLS                           bool       `json:"tls"`
	TLSCipherSuite                string     `json:"tls_cipher_suite"`
	TLSVersion                    string     `json:"tls_version"`
	TLSNegotiatedProtocol         string     `json:"tls_negotiated_protocol"`
	TLSNegotiatedProtocolIsMutual bool       `json:"tls_negotiated_protocol_is_mutual"`
	// LimitedRdy is the cap a /channel/setclientlimit puts on RDY; absent
	// when none does.
	LimitedRdy *int64 `json:"limited_rdy,omitempty"`

	// Where the client consumes, for grouping under channels.
	Topic   string `json:"-"`
	Channel string `json:"-"`
}

// PubCount is a producer's count of messages published to one topic.
type PubCount struct {
	Topic string `json:"topic"`
	Count int64  `json:"count"`
}

// clientID is IDENTIFY's client_id, else the remote host, as nsqd names
// a client.
func (s *session) clientID() string {
	if id := s.identity.Load(); id != nil && id.ClientID != "" {
		return id.ClientID
	}
	host, _, _ := net.SplitHostPort(s.conn.RemoteAddr().String())
	return host
}

func (s *session) stats() ClientStats {
	host, _, _ := net.SplitHostPort(s.conn.RemoteAddr().String())
	cs := ClientStats{
		ClientID:      s.clientID(),
		Hostname:      host,
		Version:       "V2",
		RemoteAddress: s.conn.RemoteAddr().String(),
		State:         s.state.Load(),
		MessageCount:  s.messageCount.Load(),
		FinishCount:   s.finishCount.Load(),
		RequeueCount:  s.requeueCount.Load(),
		ConnectTS:     s.connectedAt.Unix(),
	}
	st := s.settings.Load()
	cs.SampleRate, cs.Deflate, cs.Snappy = st.sampleRate, st.deflate, st.snappy
	if id := s.identity.Load(); id != nil {
		if id.Hostname != "" {
			cs.Hostname = id.Hostname
		}
		cs.UserAgent, cs.TopologyZone, cs.TopologyRegion = id.UserAgent, id.TopologyZone, id.TopologyRegion
	}
	if cs.State != stateInit && s.consumer != nil {
		cs.ReadyCount, cs.InFlightCount = s.consumer.RDY(), s.consumer.InFlight()
		if ready, ok := s.consumer.Limit(); ok {
			cs.LimitedRdy = &ready
		}
		cs.Topic, cs.Channel = s.topicName, s.channel
	}
	if st := s.tlsState.Load(); st != nil {
		cs.TLS = true
		cs.TLSCipherSuite = tls.CipherSuiteName(st.CipherSuite)
		cs.TLSVersion = tls.VersionName(st.Version)
		cs.TLSNegotiatedProtocol = st.NegotiatedProtocol
		cs.TLSNegotiatedProtocolIsMutual = true
	}
	s.pubMu.Lock()
	for t, n := range s.pubCounts {
		cs.PubCounts = append(cs.PubCounts, PubCount{Topic: t, Count: n})
	}
	s.pubMu.Unlock()
	return cs
}
