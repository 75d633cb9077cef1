package service

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// NatsChild is the name of the child function that runs nats-server.
const NatsChild = "natsd"

// Stream and subject of the bench's one stream.
const (
	natsStream  = "BENCH"
	natsSubject = "bench.events"
)

// RunNatsd runs nats-server with JetStream in args[0] (file storage,
// SyncAlways) on a random 127.0.0.1 port, prints "ready URL" and serves
// until the process is killed. It is the body of the "natsd" child.
func RunNatsd(args []string) error {
	if len(args) != 1 {
		return errors.New("natsd: want one argument, the store directory")
	}
	opts := &server.Options{
		Host:       "127.0.0.1",
		Port:       server.RANDOM_PORT,
		JetStream:  true,
		StoreDir:   args[0],
		SyncAlways: true, // sync_interval: always
		NoSigs:     true,
		NoLog:      true,
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return err
	}
	s.Start()
	if !s.ReadyForConnections(30 * time.Second) {
		return errors.New("natsd: not ready within 30s")
	}
	fmt.Printf("ready %s\n", s.ClientURL())
	s.WaitForShutdown()
	return nil
}

// Nats is a running nats-server child.
type Nats struct {
	self, dir string
	cmd       *exec.Cmd
	URL       string
}

// StartNats starts the natsd child of the binary self on store directory
// dir and waits until it accepts connections.
func StartNats(ctx context.Context, self, childFlag, dir string) (*Nats, error) {
	n := &Nats{self: self, dir: dir}
	return n, n.start(ctx, childFlag)
}

func (n *Nats) start(ctx context.Context, childFlag string) error {
	cmd := exec.Command(n.self, childFlag, NatsChild, n.dir)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	n.cmd = cmd
	line, err := firstLine(ctx, out, 60*time.Second)
	if err != nil {
		n.Kill()
		return fmt.Errorf("natsd: %w", err)
	}
	url, ok := strings.CutPrefix(line, "ready ")
	if !ok {
		n.Kill()
		return fmt.Errorf("natsd: unexpected first line %q", line)
	}
	n.URL = url
	return nil
}

// firstLine reads the first line of r within d.
func firstLine(ctx context.Context, r interface{ Read([]byte) (int, error) }, d time.Duration) (string, error) {
	type res struct {
		s   string
		err error
	}
	ch := make(chan res, 1)
	go func() {
		s, err := bufio.NewReader(r).ReadString('\n')
		ch <- res{strings.TrimSpace(s), err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			return "", fmt.Errorf("read its first line: %w", r.err)
		}
		return r.s, nil
	case <-time.After(d):
		return "", fmt.Errorf("no first line within %v", d)
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// Kill SIGKILLs the server and reaps it.
func (n *Nats) Kill() {
	if n.cmd == nil {
		return
	}
	_ = n.cmd.Process.Signal(syscall.SIGKILL)
	_ = n.cmd.Wait()
	n.cmd = nil
}

// Restart SIGKILLs the server and starts it again on the same directory.
func (n *Nats) Restart(ctx context.Context, childFlag string) error {
	n.Kill()
	return n.start(ctx, childFlag)
}

// natsConnect connects and opens JetStream; the library's own async
// bound is twice window, so only the caller's window (LoopAsync) limits.
func natsConnect(url string, window int) (*nats.Conn, jetstream.JetStream, error) {
	nc, err := nats.Connect(url, nats.MaxReconnects(0))
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(2*max(window, 1)))
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}

// CreateStream creates the bench's stream: file storage, replicas 1;
// atomic batch publish allowed when atomic.
func (n *Nats) CreateStream(ctx context.Context, atomic bool) error {
	nc, js, err := natsConnect(n.URL, 1)
	if err != nil {
		return err
	}
	defer nc.Close()
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: natsStream, Subjects: []string{natsSubject},
		Storage: jetstream.FileStorage, Replicas: 1, AllowAtomicPublish: atomic})
	return err
}

// Count is the stream's stored message count.
func (n *Nats) Count(ctx context.Context) (uint64, error) {
	nc, js, err := natsConnect(n.URL, 1)
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	var last error
	for range 50 { // just after a restart the stream may still be recovering
		s, err := js.Stream(ctx, natsStream)
		if err == nil {
			info, ierr := s.Info(ctx)
			if ierr == nil {
				return info.State.Msgs, nil
			}
			err = ierr
		}
		last = err
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return 0, last
}

// NatsPublisher opens one connection per client and returns the op of
// client i: Publish (waits for the PubAck) when window is 0, else
// PublishAsync with at most window acks outstanding per client.
type NatsPublisher struct {
	conns []*nats.Conn
	js    []jetstream.JetStream
}

// NewNatsPublisher connects clients connections to n.
func NewNatsPublisher(n *Nats, clients, window int) (*NatsPublisher, error) {
	p := &NatsPublisher{}
	for range clients {
		nc, js, err := natsConnect(n.URL, window)
		if err != nil {
			p.Close()
			return nil, err
		}
		p.conns = append(p.conns, nc)
		p.js = append(p.js, js)
	}
	return p, nil
}

// Close closes every connection.
func (p *NatsPublisher) Close() {
	for _, c := range p.conns {
		c.Close()
	}
}

// Sync is client i's Publish of payload.
func (p *NatsPublisher) Sync(ctx context.Context, i int, payload []byte) error {
	_, err := p.js[i].Publish(ctx, natsSubject, payload)
	return err
}

// Batch publishes size messages from client i as one atomic batch
// (JetStream's atomic batch publish: headers Nats-Batch-Id and
// Nats-Batch-Sequence on every message, Nats-Batch-Commit on the last, which
// alone is a request answered with the batch's PubAck) and returns the
// events the PubAck says were stored.
func (p *NatsPublisher) Batch(ctx context.Context, i int, id string, size int, payload []byte) (int, error) {
	nc := p.conns[i]
	for seq := 1; seq <= size; seq++ {
		m := nats.NewMsg(natsSubject)
		m.Data = payload
		m.Header.Set("Nats-Batch-Id", id)
		m.Header.Set("Nats-Batch-Sequence", strconv.Itoa(seq))
		if seq < size {
			if err := nc.PublishMsg(m); err != nil {
				return 0, err
			}
			continue
		}
		m.Header.Set("Nats-Batch-Commit", "1")
		rmsg, err := nc.RequestMsgWithContext(ctx, m)
		if err != nil {
			return 0, err
		}
		var ack struct {
			Error *struct {
				Description string `json:"description"`
			} `json:"error"`
			BatchSize int `json:"count"`
		}
		if err := json.Unmarshal(rmsg.Data, &ack); err != nil {
			return 0, fmt.Errorf("batch PubAck %q: %w", rmsg.Data, err)
		}
		if ack.Error != nil {
			return 0, fmt.Errorf("batch PubAck: %s", ack.Error.Description)
		}
		if ack.BatchSize != size {
			return 0, fmt.Errorf("batch PubAck %s: %d stored, %d sent", rmsg.Data, ack.BatchSize, size)
		}
	}
	return size, nil
}

// Async publishes payload from client i without waiting; the future's
// PubAck (or error) is the acknowledgement.
func (p *NatsPublisher) Async(i int, payload []byte) (jetstream.PubAckFuture, error) {
	return p.js[i].PublishAsync(natsSubject, payload)
}
