// Package service runs the servers of the bench's service section as
// separate processes (so each can be SIGKILLed and restarted) and drives
// them with closed-loop clients over the wire:
//
//   - NATS JetStream: nats-server built from its Go module
//     (github.com/nats-io/nats-server/v2) and run as a child of the bench
//     binary (the "natsd" child): JetStream file storage in a directory on
//     the disk under test, SyncAlways (the server's `sync_interval: always`:
//     an fsync before every PubAck), one stream of replicas 1. Clients
//     publish with nats.go's jetstream.Publish (waits for the PubAck) or
//     PublishAsync with a bounded window.
//   - bucketlog: the `serve` command built from ../cmd/bucketlog, with or
//     without a bucket (the bench process's gofakes3), driven by raw HTTP
//     POSTs of one event or of a batch, or by the Go client (client/).
//
// Every client counts only acknowledged appends; after a cell the stored
// count must equal the acknowledged count, and again after a SIGKILL of the
// server and a restart on the same directory (Server.Recount).
//
// Nothing here is safe for concurrent use except the drivers' Op
// functions, which the closed loop calls from every client at once.
package service
