// Package group is the consumer-group state machine of spec 2.3, 3.3 and 4.5
// without I/O: registration selectors and their topic-partition expansion,
// members with broker-suffixed ids, generations, session expiry, sticky
// assignment, and the validation rules of COMMIT_OFFSET, BATCH_COMMIT and
// RESET_OFFSETS.
//
// Callers own locking and durability: a Check* method validates a commit
// against the current state and says what must be written; the caller
// persists that, then applies it with SetOffset. Time is always passed in, so
// tests drive expiry without sleeping.
package group
