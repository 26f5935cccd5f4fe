"""The playground and /docs in a real browser: Debian's chromium, driven by Playwright."""
