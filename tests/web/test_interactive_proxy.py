"""A task's web services through the portal's proxy, on a real `pai up`: JupyterLab runs a cell
in the real browser, TensorBoard shows a job's event files, another user is turned away, and
crafted paths never reach another host or port."""

from __future__ import annotations

import http.client
import time
from collections.abc import Iterator

import asyncssh
import httpx
import pytest
from browsing import DESKTOP, ROOT, SCREENSHOTS, UPDATE_DOC_IMAGES, log_in
from playwright.sync_api import Browser, Page, expect

from e2e.pai_process import PaiUp
from pai.executors.local import kill_processes_under
from pai.sdk import Client
from server.harness import LOCAL_CLUSTER_FILE

pytestmark = [pytest.mark.slow, pytest.mark.browser]

EXAMPLES = ROOT / "examples" / "jobs"
DOC_IMAGES = ROOT / "docs" / "images"
PASSWORD = "Proxy-Password-1"
ECHO_JOB = """\
protocolVersion: 2
name: echo
type: job
prerequisites: [{type: dockerimage, name: image, uri: 'python:3.11'}]
taskRoles:
  web:
    dockerImage: image
    resourcePerInstance: {cpu: 1, memoryMB: 256, gpu: 0}
    commands:
      - |
        python3 - <<'PY'
        import http.server, os
        class Echo(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                lines = [self.path] + [f"{name}: {value}" for name, value in self.headers.items()]
                body = "\\n".join(lines).encode()
                self.send_response(200)
                self.send_header("Set-Cookie", "pai_session=forged; Path=/")
                self.send_header("Set-Cookie", "theme=light; Path=/")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
        address = (os.environ["PAI_CONTAINER_HOST_IP"], int(os.environ["PAI_CONTAINER_HOST_PORT"]))
        http.server.HTTPServer(address, Echo).serve_forever()
        PY
extras:
  com.microsoft.pai.runtimeplugin:
    - {plugin: ssh, parameters: {jobssh: false}}
"""


class Proxied:
    """`pai up` with alice's JupyterLab, TensorBoard and echo jobs running, and bob."""

    def __init__(self, platform: PaiUp) -> None:
        self.platform = platform
        with platform.client() as admin:
            for user in ("alice", "bob"):
                admin.create_user(user, PASSWORD)
        self.alice = Client.login(platform.url, "alice", PASSWORD)
        self.bob = Client.login(platform.url, "bob", PASSWORD)
        self.alice.submit(EXAMPLES / "jupyterlab.yaml")
        self.alice.submit(EXAMPLES / "tensorboard.yaml", parameters={"steps": 20})
        self.alice.submit(ECHO_JOB)
        self.jupyter = self.url_of("jupyterlab", "notebook")
        self.tensorboard = self.url_of("tensorboard", "train")
        self.echo = self.url_of("echo", "web")

    def url_of(self, job: str, role: str) -> str:
        """The proxy path of the task's http port, once the task runs."""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            detail = self.alice.job(job)
            (task,) = detail.task_roles[role].task_statuses
            if task.task_state == "RUNNING":
                return f"/jobs/alice~{job}/proxy/{role}/0/{task.ports['http'][0]}/"
            assert not detail.finished, (detail.job_status, self.alice.logs(job, role=role))
            time.sleep(0.2)
        raise AssertionError(f"{job} never ran")

    def get(self, path: str, client: Client | None, **headers: str) -> httpx.Response:
        """GET `path` as the client's user (or nobody), following no redirect."""
        if client is not None:
            headers["Authorization"] = f"Bearer {client.token}"
        return httpx.get(self.platform.url + path, headers=headers, timeout=30, trust_env=False)

    def until_up(self, path: str, attempts_for: float = 90) -> httpx.Response:
        deadline = time.monotonic() + attempts_for
        while True:
            answer = self.get(path, self.alice)
            if answer.status_code == 200 or time.monotonic() > deadline:
                return answer
            time.sleep(0.3)


def screenshot(page: Page, name: str) -> None:
    """Saved with the test artifacts; with PAI_UPDATE_PORTAL_SCREENSHOTS=1 also in docs/images."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=SCREENSHOTS / name)
    if UPDATE_DOC_IMAGES:
        page.screenshot(path=DOC_IMAGES / name)


@pytest.fixture(scope="module")
def proxied(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proxied]:
    platform = PaiUp(tmp_path_factory.mktemp("proxy") / "home", LOCAL_CLUSTER_FILE)
    platform.start()
    try:
        yield Proxied(platform)
    finally:
        platform.stop()
        kill_processes_under(platform.home)


@pytest.fixture
def alice_page(browser: Browser, proxied: Proxied) -> Iterator[Page]:
    context = browser.new_context(base_url=proxied.platform.url, viewport=DESKTOP)
    context.set_default_timeout(30_000)
    page = context.new_page()
    log_in(page, "alice", PASSWORD)
    yield page
    context.close()


def test_jupyterlab_runs_a_cell_that_sees_the_task(proxied: Proxied, alice_page: Page) -> None:
    assert proxied.until_up(proxied.jupyter + "api/status").status_code == 200
    page = alice_page
    page.goto(proxied.jupyter + "lab")
    page.locator('.jp-LauncherCard[title="Python 3 (ipykernel)"]').first.click()
    # The kernel's status arrives over the proxied WebSocket.
    expect(page.get_by_text("Python 3 (ipykernel) | Idle")).to_be_visible(timeout=60_000)
    no_news = page.get_by_role("button", name="No", exact=True)
    if no_news.is_visible():
        no_news.click()
    editor = page.locator(".jp-Notebook .jp-Cell .cm-content").first
    editor.click()
    editor.type('import os; print("job:", os.environ["PAI_JOB_NAME"])')
    page.keyboard.press("Shift+Enter")

    output = page.locator(".jp-OutputArea-output").first
    expect(output).to_have_text("job: alice~jupyterlab", timeout=60_000)
    screenshot(page, "interactive-jupyterlab.png")


def test_tensorboard_shows_the_event_files_of_the_job(proxied: Proxied, alice_page: Page) -> None:
    assert proxied.until_up(proxied.tensorboard).status_code == 200
    page = alice_page
    page.goto(proxied.tensorboard)

    expect(page.get_by_text("loss").first).to_be_visible(timeout=60_000)
    expect(page.get_by_text("train/train").first).to_be_visible()  # run "train", folder "train"
    screenshot(page, "interactive-tensorboard.png")


def test_only_the_owner_and_admins_get_through(proxied: Proxied) -> None:
    assert proxied.until_up(proxied.echo).status_code == 200
    with proxied.platform.client() as admin:
        as_admin = proxied.get(proxied.echo, admin)
    as_owner = proxied.get(proxied.echo, proxied.alice)
    assert as_admin.status_code == 200 and as_owner.status_code == 200
    # An administrator gets someone else's pages in a sandbox, away from the platform's origin.
    assert as_admin.headers["content-security-policy"].startswith("sandbox ")
    assert "content-security-policy" not in as_owner.headers

    refused = proxied.get(proxied.echo, proxied.bob)
    anonymous = proxied.get(proxied.echo, None)

    assert refused.status_code == 403 and "only alice" in refused.json()["message"]
    assert anonymous.status_code == 401


def test_the_platform_credentials_stay_with_the_platform(proxied: Proxied) -> None:
    answer = proxied.get(proxied.echo + "x?y=1", proxied.alice, Cookie="theme=dark")

    echoed = answer.text.lower().splitlines()
    assert echoed[0] == proxied.echo + "x?y=1"
    assert "cookie: theme=dark" in echoed
    assert not [line for line in echoed if line.startswith("authorization")]
    assert proxied.alice.token is not None and proxied.alice.token.lower() not in answer.text
    # The task cannot set the platform's session cookie either.
    assert answer.headers.get_list("set-cookie") == ["theme=light; Path=/"]


def raw_get(proxied: Proxied, path: str) -> int:
    """The status of a GET of exactly `path`, as a crafted request sends it (no client
    normalises it on the way)."""
    connection = http.client.HTTPConnection("127.0.0.1", proxied.platform.port, timeout=30)
    try:
        token = proxied.alice.token
        connection.request("GET", path, headers={"Authorization": f"Bearer {token}"})
        return connection.getresponse().status
    finally:
        connection.close()


def test_crafted_paths_reach_no_other_host_or_port(proxied: Proxied) -> None:
    echo = proxied.echo  # /jobs/alice~echo/proxy/web/0/<port>/
    port = echo.rstrip("/").rsplit("/", 1)[1]
    other_port = proxied.tensorboard.rstrip("/").rsplit("/", 1)[1]
    base = echo.removesuffix(f"{port}/")
    assert proxied.until_up(echo).status_code == 200

    crafted = {
        f"{echo}../../../../../alice~tensorboard/proxy/train/0/{other_port}/": 400,
        f"{echo}%2e%2e/%2e%2e/x": 400,
        f"{echo}..%2f..%2fx": 400,
        f"{echo}a\\..\\b": 400,
        f"{base}{port}@127.0.0.1:22/": 400,
        f"{base}{port}:22/": 400,
        f"{base}22/": 404,  # a port the task does not hold
        f"{base}{other_port}/": 404,  # another task's port
        f"/jobs/alice~echo/proxy/web/1/{port}/": 404,  # no such task
        f"/jobs/alice~echo/proxy/web/0/{port}//127.0.0.1:22/": 400,
    }
    assert {path: raw_get(proxied, path) for path in crafted} == crafted


def test_the_jupyterlab_example_is_a_marketplace_template(proxied: Proxied) -> None:
    names = {item.name for item in proxied.alice.market_items()}

    assert {"jupyterlab", "tensorboard"} <= names


def test_the_job_page_offers_a_shell_and_the_web_port(proxied: Proxied, alice_page: Page) -> None:
    port = proxied.echo.rstrip("/").rsplit("/", 1)[1]
    alice_page.goto("/jobs/alice~echo")

    doors = alice_page.get_by_role("region", name="Reach the tasks")
    expect(doors.get_by_text("pai ssh alice~echo web 0")).to_be_visible()
    link = doors.get_by_role("link", name=f"Open http {port}")
    expect(link).to_have_attribute("href", proxied.echo)
    # The page follows the task's log; a server thread waits for the next line even after the
    # page is gone, so a line is logged (the echo server logs each request) to release it.
    alice_page.goto("about:blank")
    assert proxied.get(proxied.echo, proxied.alice).status_code == 200


def test_ssh_keys_are_kept_on_the_account_page(alice_page: Page) -> None:
    key = asyncssh.generate_private_key("ssh-ed25519")
    page = alice_page
    page.goto("/account")
    keys = page.get_by_role("region", name="SSH keys")

    keys.get_by_label("Title").fill("desk")
    keys.get_by_label("Public key").fill("ssh-ed25519 not-a-key")
    keys.get_by_role("button", name="Add SSH key").click()
    expect(page.get_by_text("body.value: not an SSH public key")).to_be_visible()

    keys.get_by_label("Title").fill("desk")
    keys.get_by_label("Public key").fill(key.export_public_key().decode())
    keys.get_by_role("button", name="Add SSH key").click()
    expect(keys.get_by_role("row", name="desk")).to_contain_text(key.get_fingerprint())

    page.once("dialog", lambda dialog: dialog.accept())
    keys.get_by_role("row", name="desk").get_by_role("button", name="Remove").click()
    expect(page.get_by_text("SSH key 'desk' of user 'alice' is removed")).to_be_visible()
