"""Django settings of the test's OpenID Connect provider (django-oidc-provider), run by
`tests/providers/oidc.py`; everything the test varies comes from the environment."""

import os
from pathlib import Path

HERE = Path(__file__).parent
STATE = Path(os.environ["OIDC_SITE_STATE"])

SECRET_KEY = os.environ["OIDC_SITE_SECRET_KEY"]
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
SITE_URL = os.environ["OIDC_SITE_URL"]
ROOT_URLCONF = "oidc_site.urls"
INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "oidc_provider",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "oidc_site.tampering.TamperingMiddleware",
]
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [HERE / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {"context_processors": ["django.template.context_processors.request"]},
    }
]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": STATE / "provider.db"}}
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"
USE_TZ = True
LOGIN_URL = "/accounts/login/"
PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]

OIDC_IDTOKEN_INCLUDE_CLAIMS = True
OIDC_USERINFO = "oidc_site.claims.userinfo"
OIDC_IDTOKEN_PROCESSING_HOOK = "oidc_site.claims.id_token_hook"
