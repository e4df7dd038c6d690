"""The browser-use domain (paper App. C, Table 7): a local web application in the environment, worked
through its pages in a headless Chromium (the ``browser`` action set, aes/agents/browser.py); see
README.md, instructions/, base/Dockerfile and kit/ (the app framework and the browser session)."""
