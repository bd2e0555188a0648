"""What every benchmark runs on: a broker and a corpus, the app as a subprocess, its figures."""
