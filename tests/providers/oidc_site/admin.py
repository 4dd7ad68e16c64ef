"""The provider administrator's commands, run by the test as processes of their own:

python -m oidc_site.admin setup                  (database and signing key)
python -m oidc_site.admin client ID SECRET REDIRECT_URI POST_LOGOUT_URI
python -m oidc_site.admin user NAME PASSWORD [GROUP ...]   (groups are replaced)
python -m oidc_site.admin delete NAME
"""

import os
import sys

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "oidc_site.settings")
django.setup()

from django.contrib.auth.models import Group, User  # noqa: E402
from django.core.management import call_command  # noqa: E402
from oidc_provider.models import Client, ResponseType  # noqa: E402


def setup():
    call_command("migrate", verbosity=0)
    call_command("creatersakey")


def client(client_id, secret, redirect_uri, post_logout_uri):
    registered, _ = Client.objects.update_or_create(
        client_id=client_id,
        defaults={
            "name": "PAI",
            "client_type": "confidential",
            "client_secret": secret,
            "jwt_alg": "RS256",
            "require_consent": False,
            "reuse_consent": True,
        },
    )
    registered.redirect_uris = [redirect_uri]
    registered.post_logout_redirect_uris = [post_logout_uri]
    registered.save()
    registered.response_types.set([ResponseType.objects.get(value="code")])


def user(name, password, *groups):
    person, _ = User.objects.get_or_create(username=name)
    person.email = f"{name}@example.org"
    person.set_password(password)
    person.save()
    person.groups.set([Group.objects.get_or_create(name=group)[0] for group in groups])


def delete(name):
    User.objects.filter(username=name).delete()


if __name__ == "__main__":
    command, *arguments = sys.argv[1:]
    {"setup": setup, "client": client, "user": user, "delete": delete}[command](*arguments)
