"""Two traces of one job, before and after a change: each side's figures (``side``), the comparison
(``analyze``) and what it means (``findings``)."""
