"""The web view in a real browser (Debian's chromium, driven by selenium through
chromium-driver), against a running `flightdeck serve` with the embedded simulator.

Signs in with the admin token, applies examples/openstack.yaml through the API, sees the
cluster become Ready on the fleet page without a reload, opens the cluster, starts a
fault from the simulator panel, sees the repair appear in the timeline, then signs in
as a viewer and checks that the viewer cannot start a fault (the page offers no control,
and the API refuses the request with 403). Saves full-page screenshots.

Usage: web_test.py URL ADMIN_TOKEN_FILE VIEWER_TOKEN_FILE SPEC OUT_DIR
"""

import base64
import json
import sys
import time
import urllib.error
import urllib.request

from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import Select, WebDriverWait

URL, ADMIN_FILE, VIEWER_FILE, SPEC, OUT = sys.argv[1:6]
ADMIN = open(ADMIN_FILE).read().strip()
VIEWER = open(VIEWER_FILE).read().strip()
MARKER = "flightdeck-no-reload"
passed = 0


def ok(what):
    global passed
    passed += 1
    print(f"ok: {what}", flush=True)


def fail(what):
    print(f"FAIL: {what}", flush=True)
    try:
        shot("failure")
        print("--- page text\n" + driver.find_element(By.TAG_NAME, "body").text[:3000])
        for entry in driver.get_log("browser")[-20:]:
            print("browser:", entry)
    except Exception as e:  # the browser may be gone
        print(f"(no screenshot: {e})")
    sys.exit(1)


def api(path, token, method="GET", body=None, content_type=None):
    req = urllib.request.Request(URL + path, method=method, data=body)
    req.add_header("Authorization", f"Bearer {token}")
    if content_type:
        req.add_header("Content-Type", content_type)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def shot(name, width=None):
    """A full-page screenshot: the page's whole height, not only the window."""
    metrics = driver.execute_cdp_cmd("Page.getLayoutMetrics", {})
    size = metrics["cssContentSize"]
    w = width or max(1280, int(size["width"]))
    h = int(size["height"])
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": w, "height": h, "deviceScaleFactor": 1, "mobile": width is not None and width < 600},
    )
    time.sleep(0.3)
    png = driver.execute_cdp_cmd(
        "Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True}
    )
    driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    path = f"{OUT}/{name}.png"
    with open(path, "wb") as f:
        f.write(base64.b64decode(png["data"]))
    print(f"screenshot: {path}", flush=True)


def wait(seconds, condition, what):
    try:
        return WebDriverWait(driver, seconds, poll_frequency=0.25).until(condition)
    except Exception:
        fail(f"{what} (waited {seconds} s)")


def click(selector):
    """Clicks what `selector` finds; the page redraws live, so an element found a moment
    ago may have been replaced: it is found again (at most 10 times)."""
    for _ in range(10):
        try:
            driver.find_element(By.CSS_SELECTOR, selector).click()
            return
        except StaleElementReferenceException:
            time.sleep(0.2)
    fail(f"{selector} kept being redrawn under the click")


def no_reload():
    if driver.execute_script(f"return window['{MARKER}'] === true") is not True:
        fail("the page was reloaded")


def sign_in(token):
    driver.get(URL + "/")
    box = wait(20, EC.element_to_be_clickable((By.ID, "token")), "the sign-in form")
    box.send_keys(token)
    driver.find_element(By.ID, "login-submit").click()
    wait(20, EC.presence_of_element_located((By.ID, "fleet-counts")), "the fleet page after sign-in")
    if token in driver.current_url:
        fail("the token is in the page's URL")


options = Options()
options.binary_location = "/usr/bin/chromium"
for arg in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,900"]:
    options.add_argument(arg)
options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
driver = webdriver.Chrome(options=options, service=Service("/usr/bin/chromedriver"))
try:
    # A wrong token is refused with a message, and nothing is shown.
    driver.get(URL + "/")
    wait(20, EC.element_to_be_clickable((By.ID, "token")), "the sign-in form").send_keys("not-a-token")
    driver.find_element(By.ID, "login-submit").click()
    wait(10, EC.text_to_be_present_in_element((By.ID, "login-error"), "not one of"), "a refusal of a wrong token")
    ok("a wrong token is refused on the sign-in form")

    sign_in(ADMIN)
    role = driver.find_element(By.ID, "role").text
    if role != "admin":
        fail(f"signed in with the admin token, the page says the role is {role!r}")
    driver.execute_script(f"window['{MARKER}'] = true")
    ok("signed in with the admin token")

    with open(SPEC, "rb") as f:
        status, applied = api("/api/v1/clusters?source=openstack.yaml", ADMIN, "POST", f.read(), "application/yaml")
    if status != 200:
        fail(f"apply answered {status}: {applied}")
    name = applied["items"][0]["name"]
    ok(f"applied {SPEC} through the API: cluster {name}")

    row = f"#fleet-table tr[data-cluster='{name}']"
    wait(30, EC.presence_of_element_located((By.CSS_SELECTOR, row)), f"cluster {name} on the fleet page")
    wait(240, EC.presence_of_element_located((By.CSS_SELECTOR, row + "[data-phase='Ready']")),
         f"cluster {name} Ready on the fleet page")
    no_reload()
    ok(f"cluster {name} became Ready on the fleet page without a reload")

    # Two more clusters on the other simulated clouds: trouble (not Ready) sorts first.
    for extra in ["examples/kubevirt.yaml", "examples/opennebula.yaml"]:
        with open(extra, "rb") as f:
            status, body = api("/api/v1/clusters?source=" + extra, ADMIN, "POST", f.read(), "application/yaml")
        if status != 200:
            fail(f"apply {extra} answered {status}: {body}")
    wait(30, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#fleet-table tbody tr")) == 3, "three clusters on the fleet page")
    phases = [r.get_attribute("data-phase") for r in driver.find_elements(By.CSS_SELECTOR, "#fleet-table tbody tr")]
    ready_seen = False
    for p in phases:
        if p == "Ready":
            ready_seen = True
        elif ready_seen:
            fail(f"a cluster that is not Ready is listed below a Ready one: {phases}")
    no_reload()
    ok(f"the fleet page lists every cluster, trouble first: {phases}")
    shot("fleet")
    shot("fleet-phone", width=390)

    click(row + " a")
    wait(20, EC.presence_of_element_located((By.CSS_SELECTOR, "#tree [data-machine]")), "the cluster's machine tree")
    wait(20, EC.presence_of_element_located((By.CSS_SELECTOR, "#timeline circle")), "events in the timeline")
    no_reload()
    machines = len(driver.find_elements(By.CSS_SELECTOR, "#tree [data-machine]"))
    if machines < 5:
        fail(f"the tree shows {machines} machine(s), the spec asks for 5")
    ok(f"the cluster page shows the describe tree ({machines} machines) and the timeline")

    wait(20, EC.element_to_be_clickable((By.ID, "fault-start")), "the simulator panel's start button")
    Select(driver.find_element(By.ID, "fault-kind")).select_by_value("nova.serverError")
    count = driver.find_element(By.ID, "fault-count")
    count.clear()
    count.send_keys("1")
    click("#fault-start")
    wait(20, EC.text_to_be_present_in_element((By.ID, "sim-panel"), "nova.serverError"),
         "the started fault listed in the simulator panel")
    ok("started nova.serverError from the simulator panel")
    repair = "#timeline circle[data-row='repairs'][data-reason='RemediationStarted']"
    wait(120, EC.presence_of_element_located((By.CSS_SELECTOR, repair)), "the repair in the timeline")
    no_reload()
    ok("the repair (RemediationStarted) appeared in the timeline without a reload")
    time.sleep(1.5)
    shot("cluster")
    shot("cluster-phone", width=390)

    status, faults = api("/api/v1/sim/faults", ADMIN)
    before = len(faults["active"])
    driver.find_element(By.ID, "logout").click()
    wait(10, EC.presence_of_element_located((By.ID, "token")), "the sign-in form after signing out")
    if driver.execute_script("return sessionStorage.length") != 0:
        fail("signing out left the token in session storage")
    ok("signing out forgets the token")

    sign_in(VIEWER)
    if driver.find_element(By.ID, "role").text != "viewer":
        fail("the viewer token is not shown as a viewer")
    driver.get(URL + f"/#/cluster/{name}")
    wait(20, EC.presence_of_element_located((By.CSS_SELECTOR, "#tree [data-machine]")), "the cluster page as a viewer")
    wait(20, EC.presence_of_element_located((By.ID, "fault-start")), "the simulator panel as a viewer")
    # Read both controls in one script: the page redraws live, and an element found in one
    # call may be replaced before the next.
    enabled = driver.execute_script(
        "return ['fault-start', 'delete'].filter((id) => !document.getElementById(id).disabled)")
    if enabled:
        fail(f"a viewer is offered the fault or delete controls: {enabled} enabled")
    # The page's controls are only a courtesy: the API itself must refuse the viewer.
    answer = driver.execute_async_script(
        """
        const done = arguments[arguments.length - 1];
        fetch('/api/v1/sim/faults', {method: 'POST',
          headers: {'Authorization': 'Bearer ' + sessionStorage.getItem('flightdeck-token'),
                    'Content-Type': 'application/json'},
          body: JSON.stringify({kind: 'nova.serverError', cluster: arguments[0], count: 1})})
          .then(r => done(r.status)).catch(e => done(String(e)));
        """,
        name,
    )
    if answer != 403:
        fail(f"a viewer's fault request was answered {answer}, not 403")
    status, faults = api("/api/v1/sim/faults", ADMIN)
    if len(faults["active"]) != before:
        fail("a viewer's refused request still started a fault")
    ok("a viewer cannot start a fault: no control on the page, 403 from the API, no fault started")
    shot("cluster-viewer")
finally:
    driver.quit()
print(f"web view: {passed} checks passed")
