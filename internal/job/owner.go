package job

import "strconv"

// Owners of jobs that no account sent. Accounts of the HTTP API own theirs
// under the account's name, which may not contain ':' and may not be
// OwnerCLI, so these never name an account's jobs.
const (
	// OwnerCLI owns the jobs of `transcriber transcribe`: whoever runs the
	// command reaches Temporal directly and needs no account.
	OwnerCLI = "cli"
)

// TelegramOwner owns the jobs a Telegram user sent. It is the sender's
// user id, not the chat's, so that a person's jobs in a group are theirs.
func TelegramOwner(userID int64) string { return "telegram:" + strconv.FormatInt(userID, 10) }

// VaultOwner owns the jobs a notes-vault device sent.
func VaultOwner(device string) string { return "vault:" + device }
