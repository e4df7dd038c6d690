"""The computer-use domain (paper App. C, Table 7): a graphical desktop in the environment (Xvfb,
openbox, LibreOffice Writer and Calc) with a document open, edited through the GUI with screenshots,
mouse and keyboard (the ``desktop`` action set, aes/agents/desktop.py); see README.md, instructions/,
base/Dockerfile and base/desktop/ (the desktop kit every seed copies)."""
