"""The names of the cookies the platform sets in a browser: the portal sets them, and the
proxy to a job's ports must keep them from ever reaching a task."""

SESSION_COOKIE = "pai_session"
LOGIN_COOKIE = "pai_login"
"""Binds the login form to the browser that loaded it (see `pai.web.session`)."""
