"""Prints the text of each page of the PDF named on the command line."""
import sys

from pypdf import PdfReader

for page in PdfReader(sys.argv[1]).pages:
    print(page.extract_text())
