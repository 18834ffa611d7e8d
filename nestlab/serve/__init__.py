"""``nestlab serve``: containerlab's REST API (clab-api-server's, which containerlab's web, desktop and VS Code apps
drive) over this machine's labs.  Logins are the machine's (PAM, group membership); an ordinary user's labs run as
that user, in the user's own namespaces (docs/rootless.md), an administrator's as root (docs/serve.md)."""
