# Loads HTML reports in headless Chromium (Debian's chromium + chromium-driver,
# driven by selenium) and checks them:
#   html_check.py CASES.json SHOTDIR
# CASES.json: [{"html": path, "kind": str|null, "typical": str|null,
#               "charts": int, "shot": name|null, "hostile": bool}]
import json, os, sys, tempfile

from selenium import webdriver
from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

cases = json.load(open(sys.argv[1]))
shots = sys.argv[2]
profile = tempfile.mkdtemp(prefix="tcpdoctor-chromium-")

opts = webdriver.ChromeOptions()
opts.binary_location = os.environ.get("CHROMIUM", "/usr/bin/chromium")
for a in ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
          "--disable-background-networking", "--disable-component-update", "--disable-sync",
          "--user-data-dir=" + profile, "--window-size=1000,1200", "--hide-scrollbars"]:
    opts.add_argument(a)
opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
service = Service(executable_path=os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver"))
driver = webdriver.Chrome(service=service, options=opts)
failures = []

def check(cond, what, case):
    if not cond:
        failures.append("%s: %s" % (case["html"], what))
        print("FAIL", case["html"], what, flush=True)

try:
    for case in cases:
        driver.get("file://" + os.path.abspath(case["html"]))
        logs = driver.get_log("browser")
        errors = [l for l in logs if l["level"] in ("SEVERE", "ERROR")]
        check(not errors, "console errors: %r" % errors, case)
        try:
            alert = driver.switch_to.alert
            check(False, "an alert opened: %r" % alert.text, case)
            alert.dismiss()
        except NoAlertPresentException:
            pass
        charts = driver.find_elements(By.CSS_SELECTOR, "svg.chart")
        check(len(charts) >= case["charts"], "%d charts, want >= %d" % (len(charts), case["charts"]), case)
        text = driver.find_element(By.TAG_NAME, "body").text
        if case.get("kind"):
            verdict = driver.find_element(By.ID, "verdict").text
            check(case["kind"] in verdict, "kind %s not in the verdict" % case["kind"], case)
            check(case["typical"] in verdict, "typical delay %s not in the verdict" % case["typical"], case)
            check(driver.find_elements(By.CSS_SELECTOR, "svg.ladder .arrow.hot") != [] or
                  case["kind"] not in ("nagle_delayed_ack",), "no highlighted ladder arrow", case)
        # The table sorts and filters.
        rows = driver.find_elements(By.CSS_SELECTOR, "#conns tbody tr")
        if len(rows) > 1:
            first = rows[0].find_elements(By.TAG_NAME, "td")[0].text
            driver.find_element(By.CSS_SELECTOR, "#conns th").click()  # first click: descending
            again = driver.find_elements(By.CSS_SELECTOR, "#conns tbody tr")[0].find_elements(By.TAG_NAME, "td")[0].text
            ids = sorted(int(r.find_elements(By.TAG_NAME, "td")[0].text) for r in rows)
            check(int(again) == ids[-1], "sorting by id (descending) gave %s first (was %s)" % (again, first), case)
            driver.find_element(By.ID, "filter").send_keys("no-such-connection")
            shown = [r for r in driver.find_elements(By.CSS_SELECTOR, "#conns tbody tr") if r.is_displayed()]
            check(shown == [], "filter left %d rows" % len(shown), case)
            driver.refresh()
        if case.get("hostile"):
            check(driver.execute_script("return typeof window.__pwned") == "undefined", "injected script ran", case)
            check(driver.execute_script("return document.scripts.length") == 1, "more than our one script", case)
            check(driver.execute_script("return document.images.length") == 0, "an injected <img>", case)
            src = open(case["html"], encoding="utf-8").read()
            for raw in ["<script>window", "<img", "onerror=\"", "\x1b", "\x07"]:
                check(raw not in src, "raw %r in the HTML" % raw, case)
            check("\x1b" not in text, "terminal escape in the page text", case)
        if case.get("shot"):
            h = driver.execute_script("return document.documentElement.scrollHeight")
            driver.set_window_size(1000, min(h + 20, 6000))
            driver.execute_script("window.scrollTo(0, 0)")
            driver.save_screenshot(os.path.join(shots, case["shot"]))
            driver.set_window_size(1000, 1200)
        print("ok  ", case["html"], "(%d charts)" % len(charts), flush=True)
finally:
    driver.quit()

if failures:
    print("%d failure(s)" % len(failures))
    sys.exit(1)
