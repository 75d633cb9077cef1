// Package deploy holds bucketlog's deployment example (a Dockerfile, the
// Kubernetes manifests and the bucket IAM policies) and, in its tests, the
// checks that keep them in step with the binary. It is its own Go module so
// that the Kubernetes API types stay out of the main module.
package deploy
