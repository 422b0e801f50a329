"""The Textual app. Renders state and dispatches actions; never imports asyncssh or httpx."""
