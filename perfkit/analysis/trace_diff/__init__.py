"""Two traces of one job, before and after a change: each side's figures (``side``), the comparison
(``diff``) and what it means (``findings``)."""
