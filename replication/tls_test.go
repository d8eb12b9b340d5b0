package replication

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/partitamq/partita/internal/testcert"
)

// tlsOf is the mutual TLS of a node whose certificate ca issued, trusting
// trust.
func tlsOf(t *testing.T, ca *testcert.CA, trust *testcert.CA, name string) *TLS {
	return NewTLS(ca.Issue(t, name).TLS, trust.Pool())
}

// A follower serving mutual TLS takes writes only from leaders holding a
// certificate of the cluster CA: a plain-text leader and one with another
// CA's certificate cannot open a stream, and nothing they send is applied.
func TestMutualTLSAdmitsOnlyClusterCertificates(t *testing.T) {
	cluster := testcert.NewCA(t, "cluster")
	other := testcert.NewCA(t, "other")
	rec := &recorder{}
	opt := Options{Heartbeat: 40 * time.Millisecond, DownAfter: 200 * time.Millisecond}
	srvOpt := opt
	srvOpt.TLS = tlsOf(t, cluster, cluster, "follower")
	logs := &logRecorder{}
	srvOpt.Logger = slog.New(logs)
	_, addr := startServer(t, rec, srvOpt)

	member := tlsOf(t, cluster, cluster, "leader")
	conn, err := DialTLS(addr, member)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	l := newLeader(1)
	s := l.open(t, conn, opt)
	if err := s.Send(writeFrame(1, 8)); err != nil {
		t.Fatal(err)
	}
	if a := l.nextAck(t); a.GetLogId() != 1 || a.GetCode() != "" {
		t.Fatalf("member's write: ack %v", a)
	}

	for name, tl := range map[string]*TLS{
		"plain text":               nil,
		"another CA's certificate": tlsOf(t, other, cluster, "intruder"),
		"trusting another CA":      tlsOf(t, other, other, "intruder"),
	} {
		t.Run(name, func(t *testing.T) {
			conn, err := DialTLS(addr, tl)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			l := newLeader(1)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			s, err := Open(ctx, conn, opt, l.onFrame, l.onDown)
			if err == nil {
				defer s.Close()
				s.Send(writeFrame(2, 8))
				if err := l.waitDown(t, 5*time.Second); err == nil {
					t.Fatal("stream reported down without an error")
				}
			}
			if ids := rec.logIDs(); len(ids) != 1 {
				t.Fatalf("follower applied %v; only the member's write 1 may arrive", ids)
			}
			// An operator can see who was turned away.
			eventually(t, 5*time.Second, "a warning of the refused connection", func() bool {
				return logs.warned("TLS handshake failed")
			})
		})
	}
}

// A leader with the cluster certificate does not talk to a follower whose
// certificate the cluster CA did not sign: it would hand its writes to an
// impostor.
func TestMutualTLSRefusesForeignFollower(t *testing.T) {
	cluster := testcert.NewCA(t, "cluster")
	other := testcert.NewCA(t, "other")
	opt := Options{Heartbeat: 40 * time.Millisecond, DownAfter: 200 * time.Millisecond}
	srvOpt := opt
	srvOpt.TLS = tlsOf(t, other, cluster, "impostor")
	rec := &recorder{}
	_, addr := startServer(t, rec, srvOpt)
	conn, err := DialTLS(addr, tlsOf(t, cluster, cluster, "leader"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	l := newLeader(1)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if s, err := Open(ctx, conn, opt, l.onFrame, l.onDown); err == nil {
		defer s.Close()
		s.Send(writeFrame(1, 8))
		l.waitDown(t, 5*time.Second)
	}
	if ids := rec.logIDs(); len(ids) != 0 {
		t.Fatalf("impostor follower got writes %v", ids)
	}
}
