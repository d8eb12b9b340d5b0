package protocol

import (
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/partitamq/partita/broker"
)

// Server accepts NSQ V2 connections and runs one session per connection.
type Server struct {
	Broker *broker.Broker
	Limits Limits
	Logger *slog.Logger
	// Connections, if set, counts open connections (a Prometheus gauge).
	Connections interface {
		Inc()
		Dec()
	}
	// TLSConfig, if set, lets clients upgrade with IDENTIFY tls_v1.
	TLSConfig *tls.Config
	// TLSRequired refuses every command but IDENTIFY before the upgrade.
	TLSRequired bool
	// Auth, if set, requires AUTH before PUB, MPUB, DPUB and SUB.
	Auth *AuthServer
	// MaxConnections caps open client connections; 0 is no cap.
	MaxConnections int

	nextID   atomic.Int64
	mu       sync.Mutex
	ln       net.Listener
	sessions map[int64]*session
	wg       sync.WaitGroup
	closed   bool
	stopping chan struct{} // closed when Close begins, for sleeping readers
}

// Serve accepts connections until Close.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.sessions == nil {
		s.sessions = make(map[int64]*session)
	}
	s.ln = ln
	s.Limits.TLSAvailable = s.TLSConfig != nil
	s.Limits.AuthRequired = s.Auth != nil
	s.mu.Unlock()
	if s.Logger == nil {
		s.Logger = slog.Default()
	}
	for {
		conn, err := ln.Accept()
		if err != nil {
			if s.isClosed() || errors.Is(err, net.ErrClosed) {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return err
		}
		sess := newSession(s, conn, s.nextID.Add(1))
		if full, ok := s.add(sess); !ok {
			if full {
				go refuseConn(conn, s.MaxConnections)
			} else {
				conn.Close()
			}
			continue
		}
		s.wg.Add(1)
		if s.Connections != nil {
			s.Connections.Inc()
		}
		go func() {
			defer s.wg.Done()
			sess.run()
			s.remove(sess)
			if s.Connections != nil {
				s.Connections.Dec()
			}
		}()
	}
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// add registers a session; full says it was refused for --max-connections.
func (s *Server) add(sess *session) (full, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false, false
	}
	if s.MaxConnections > 0 && len(s.sessions) >= s.MaxConnections {
		return true, false
	}
	s.sessions[sess.id] = sess
	sess.stopping = s.stopSignal()
	return false, true
}

// refuseConn answers a connection over --max-connections with an error
// frame, which a client reads as the answer to its first command, and
// closes it.
func refuseConn(conn net.Conn, max int) {
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(time.Second))
	e := Fatal(E_INVALID, "too many connections (max %d)", max)
	WriteFrame(conn, FrameTypeError, []byte(e.Error()))
	// Reading what the client sent before closing keeps the kernel from
	// resetting the connection before the frame is read.
	io.Copy(io.Discard, io.LimitReader(conn, 64*1024))
}

func (s *Server) remove(sess *session) {
	s.mu.Lock()
	delete(s.sessions, sess.id)
	s.mu.Unlock()
}

// StopAccepting closes the listener; sessions go on.
func (s *Server) StopAccepting() {
	s.mu.Lock()
	s.closed = true
	ln := s.ln
	s.mu.Unlock()
	if ln != nil {
		ln.Close()
	}
}

// Close stops accepting, closes every connection and waits for the sessions
// to end (each unsubscribes from its channels).
//
// Each session first reads what its client had sent and executes it, so
// that a consumer's FINs already on their way are applied and saved with
// the channel; a session still busy after closeWait (a client that does not
// read its answers, or goes on sending) has its connection closed.
func (s *Server) Close() {
	s.StopAccepting()
	s.mu.Lock()
	if stop := s.stopSignal(); !isClosed(stop) {
		close(stop)
	}
	for _, sess := range s.sessions {
		sess.stopReading()
	}
	s.mu.Unlock()
	ended := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(ended)
	}()
	select {
	case <-ended:
		return
	case <-time.After(closeWait):
	}
	s.mu.Lock()
	for _, sess := range s.sessions {
		sess.conn.Close()
	}
	s.mu.Unlock()
	<-ended
}

// stopSignal is closed when Close begins; s.mu is held.
func (s *Server) stopSignal() chan struct{} {
	if s.stopping == nil {
		s.stopping = make(chan struct{})
	}
	return s.stopping
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// closeWait bounds how long Close waits for sessions to finish what their
// clients sent before it closes their connections.
const closeWait = time.Second

// Clients returns a snapshot of every connected client, for /stats.
func (s *Server) Clients() []ClientStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ClientStats, 0, len(s.sessions))
	for _, sess := range s.sessions {
		out = append(out, sess.stats())
	}
	return out
}
