"""Drives imserver's operator console in headless Chromium (selenium + chromedriver).

    console_browser.py BASE_URL PASSWORD CHROMEDRIVER SCREENSHOT_DIR

The server (started by ConsoleBrowserTests) has user ann online and a conversation between ann and
bob. The script signs in (after a wrong password), creates an app, changes a setting, finds ann and
blocks her, reads the conversation, views statistics and the overview (also at a phone's size),
signs out, and checks that a page without a session goes to the login. Every page is saved as a
screenshot. It prints one JSON line of what it did; a failed check raises (exit status 1). Each
step is logged on stderr with the seconds since the start, so a failure says where and how slow.
"""
import json
import os
import sys
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.common.exceptions import SessionNotCreatedException, StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait

base, password, chromedriver, shots = sys.argv[1:5]
os.makedirs(shots, exist_ok=True)

options = webdriver.ChromeOptions()
options.binary_location = os.environ.get("IMSERVER_TEST_CHROMIUM", "/usr/bin/chromium")
for argument in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1280,900",
                 "--disable-extensions", "--no-first-run"]:
    options.add_argument(argument)
started = time.monotonic()


def log(text):
    sys.stderr.write("%7.2f s  %s\n" % (time.monotonic() - started, text))
    sys.stderr.flush()


# Chromium's start can outlast chromedriver's own limit on a loaded machine: one more try then.
try:
    driver = webdriver.Chrome(service=Service(chromedriver), options=options)
except SessionNotCreatedException as error:
    log("chromium did not start (%s); trying once more" % str(error).splitlines()[0])
    driver = webdriver.Chrome(service=Service(chromedriver), options=options)
log("chromium started")
# Pages are redrawn after each action: an element found a moment ago may be gone, so a wait looks again.
wait = WebDriverWait(driver, 60, ignored_exceptions=[StaleElementReferenceException])
done = {}


def shot(name):
    log("page " + name)
    driver.save_screenshot(os.path.join(shots, name + ".png"))


def element(selector):
    return wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, selector)))


def click(selector):
    wait.until(ec.element_to_be_clickable((By.CSS_SELECTOR, selector))).click()


def status_says(text):
    wait.until(lambda d: text in d.find_element(By.ID, "status").text)
    return driver.find_element(By.ID, "status").text


def go(page):
    driver.get(base + "/console#" + page)
    wait.until(lambda d: d.execute_script("return document.body.dataset.page") == page)


try:
    # Without a session, the console sends the browser to the login.
    driver.get(base + "/console")
    wait.until(ec.url_contains("/console/login"))
    shot("01-login")

    # A wrong password is refused, with the reason and its code.
    element("#password").send_keys("not the password")
    click("#login-submit")
    error = element("#login-error").text
    assert "wrong name or password" in error and "1004" in error, error
    assert "/console/login" in driver.current_url
    shot("02-login-refused")

    element("#password").send_keys(password)
    click("#login-submit")
    wait.until(lambda d: d.current_url.rstrip("/").endswith("/console") or "/console#" in d.current_url)
    wait.until(lambda d: d.execute_script("return document.body.dataset.page") == "overview")
    assert int(element("#live-connections").text) >= 1
    shot("03-overview")

    # Apps: create one; its key and secret are shown once.
    go("apps")
    element("#new-app-name").send_keys("made in the browser")
    click("#create-app")
    done["createdAppKey"] = element("#created-app-key").text
    assert element("#created-app-secret").text
    shot("04-apps")

    # Back to the development app (the first) for the rest.
    first = driver.execute_script("return document.querySelector('#app-select option').value")
    driver.execute_script("const s = document.getElementById('app-select'); s.value = arguments[0]; s.dispatchEvent(new Event('change'));", first)
    done["appKey"] = first

    # Settings: cloud history retention down to 30 days.
    go("settings")
    field = element("#setting-cloudHistoryRetentionDays")
    field.clear()
    field.send_keys("30")
    click("#save-settings")
    status_says("save settings: done")
    wait.until(lambda d: d.find_element(By.ID, "reset-cloudHistoryRetentionDays"))
    shot("05-settings")

    # Users: find ann, see her device online, block her.
    go("users")
    element("#user-search").send_keys("ann")
    click("#user-find")
    assert element("#user-name").text == "ann"
    assert "Ann Lee" in element("#user-profile").text, element("#user-profile").text
    rows = driver.find_elements(By.CSS_SELECTOR, "#user-sessions tbody tr")
    assert len(rows) == 1, len(rows)
    done["sessionsBeforeBlock"] = len(rows)
    shot("06-user")
    minutes = element("#block-minutes")
    minutes.clear()
    minutes.send_keys("30")
    click("#user-ban")
    wait.until(lambda d: "Blocked until" in d.find_element(By.ID, "user-blocked").text)
    # The block closes her sessions; the page shows them as the server has them now.
    for _ in range(20):
        if not driver.find_elements(By.CSS_SELECTOR, "#user-sessions tbody tr"):
            break
        time.sleep(0.5)
        click("#user-refresh")
        element("#user-sessions")
    done["sessionsAfterBlock"] = len(driver.find_elements(By.CSS_SELECTOR, "#user-sessions tbody tr"))
    assert done["sessionsAfterBlock"] == 0
    shot("07-user-blocked")

    # History: the conversation as bob sees it.
    go("history")
    element("#history-user").send_keys("bob")
    element("#history-target").send_keys("ann")
    click("#history-load")
    wait.until(lambda d: "hello from ann" in d.find_element(By.ID, "history").text)
    done["historyRows"] = len(driver.find_elements(By.CSS_SELECTOR, "#history tbody tr"))
    shot("08-history")
    # Recall ann's message as an administrator: the conversation then shows the recall notice.
    ann_row = [row for row in driver.find_elements(By.CSS_SELECTOR, "#history tbody tr") if "hello from ann" in row.text][0]
    done["recalledUID"] = ann_row.find_element(By.CSS_SELECTOR, "button[data-action=recall]").get_attribute("data-uid")
    ann_row.find_element(By.CSS_SELECTOR, "button[data-action=recall]").click()
    status_says("recall: done")
    wait.until(lambda d: "RC:RcNtf" in d.find_element(By.ID, "history").text and "hello from ann" not in d.find_element(By.ID, "history").text)
    shot("08b-history-recalled")

    # Statistics: today's row, with the messages sent.
    go("statistics")
    table = element("#stats-table")
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#stats-table tbody tr")) >= 1)
    cells = driver.find_elements(By.CSS_SELECTOR, "#stats-table tbody tr:last-child td")
    done["statisticsToday"] = {"day": cells[0].text, "messages": int(cells[1].text), "activeUsers": int(cells[3].text)}
    assert element("#chart-messages").find_elements(By.TAG_NAME, "rect")
    shot("09-statistics")

    # A phone's screen: the page fits its width (wide tables scroll inside their box).
    driver.set_window_size(390, 844)
    go("overview")
    overflow = driver.execute_script("return document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 1, overflow
    shot("10-phone-overview")
    go("users")
    shot("11-phone-users")
    driver.set_window_size(1280, 900)

    # Signing out ends the session: the console goes back to the login.
    click("#logout")
    wait.until(ec.url_contains("/console/login"))
    driver.get(base + "/console")
    wait.until(ec.url_contains("/console/login"))
    shot("12-signed-out")
    done["signedOut"] = True
except Exception:
    shot("failure")
    sys.stderr.write("page at failure: " + driver.current_url + "\n" + driver.page_source[:1500] + "\n")
    raise
finally:
    driver.quit()

print(json.dumps(done))
