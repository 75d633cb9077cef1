package main

import "github.com/bucketlog/bucketlog"

// exitCode is the process exit code of a class (doc.go, Errors).
func exitCode(class string) int {
	switch class {
	case bucketlog.ClassOK:
		return 0
	case bucketlog.ClassInvariant:
		return 1
	case bucketlog.ClassUsage:
		return 2
	case bucketlog.ClassInvalidState:
		return 3
	case bucketlog.ClassInvalidInput:
		return 4
	case bucketlog.ClassNotOwner:
		return 6
	case bucketlog.ClassNotInBucket:
		return 7
	case bucketlog.ClassFenced:
		return 8
	default:
		return 5
	}
}
