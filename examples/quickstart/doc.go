// Package quickstart is the shortest integration test of a program built
// on bucketlog: its test opens a log on an in-process S3 emulator
// (bucketlogtest), appends, scans, reads one execution, pulls, acks and
// closes, importing nothing but bucketlog and bucketlogtest. Copy it.
package quickstart
