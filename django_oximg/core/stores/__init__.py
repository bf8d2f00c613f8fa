"""Where sources come from and results go: protocols, local disk, HTTP, remote reads."""
